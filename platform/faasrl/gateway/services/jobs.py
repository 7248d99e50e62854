"""What the jobs router answers beyond one call to the job manager: a job's metrics as CSV, its
rounds as a server-sent event stream, its policy's weights (as stored, or as ONNX), and its
videos."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from faasrl.data.connection import UNREACHABLE
from faasrl.data.keys import env_code_key, params_key
from faasrl.gateway.schemas import MetricColumnOut
from faasrl.gateway.services import Services
from faasrl.gateway.services.sse import Pace, redis_error
from faasrl.job_manager import JobNotFound
from faasrl.jobs.spec import FUNCTION_FIELDS
from faasrl.jobs.store import ACTIVE, JobRecord
from faasrl.jobs.videos import VideoFile, listed, record_version, video_path
from faasrl.namespaces import local_name
from faasrl.rl.onnx_export import to_onnx
from faasrl.rl.seeds import evaluation_seeds
from faasrl.round_row import COLUMNS, namespaced

# A model version's file formats (each its file's suffix): the safetensors file a job
# published, or ONNX built from it.
ModelFormat = Literal["safetensors", "onnx"]


async def owned(svc: Services, job_id: str, namespace: str) -> JobRecord:
    """``namespace``'s job ``job_id``; ``JobNotFound`` for another namespace's, as for one
    that never was (no existence leak)."""
    rec = await svc.jobs.get(job_id)
    if rec.namespace != namespace:
        raise JobNotFound(f"no job {job_id!r}")
    return rec


def shown(rec: JobRecord) -> JobRecord:
    """A job's record as the API answers it: its functions under their bare names."""
    spec = rec.spec.model_copy(update={f: local_name(getattr(rec.spec, f))
                                       for f in FUNCTION_FIELDS})
    return rec.model_copy(update={"spec": spec})


# A metrics row's names: as stored (v1) or group/name (v2, faasrl.round_row's groups).
ColumnNames = Literal["v1", "v2"]


def metric_columns() -> list[MetricColumnOut]:
    """Every named metrics column (a column not named is the algorithm's own figure)."""
    return [MetricColumnOut.model_validate(c, from_attributes=True) for c in COLUMNS.values()]


def named(rows: list[dict[str, Any]], names: ColumnNames) -> list[dict[str, Any]]:
    return rows if names == "v1" else [namespaced(row) for row in rows]


def metrics_csv(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV: every column any row has, in first-seen order; lists and dicts as JSON."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list | dict) else v
                         for k, v in row.items()})
    return out.getvalue()


async def events(svc: Services, job_id: str, start: int, *, closing: Callable[[], bool],
                 disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[str]:
    """Server-sent events from row ``start`` on: ``round`` per metrics row (``id``: its index),
    then ``end`` with the job record once the job is no longer active; ``error`` and the end
    of the stream if Redis is unreachable. Ends too when the gateway is ``closing`` or the
    client has ``disconnected``."""
    index, pace = start, Pace(disconnected)
    while not closing():
        try:
            rows = await svc.jobs.store.rows(job_id, index)
            for row in rows:
                yield f"id: {index}\nevent: round\ndata: {json.dumps(row)}\n\n"
                index += 1
            rec = await svc.jobs.get(job_id)
            if rec.status not in ACTIVE and not await svc.jobs.store.rows(job_id, index):
                yield f"event: end\ndata: {shown(rec).model_dump_json()}\n\n"
                return
        except UNREACHABLE as exc:
            yield redis_error(exc)
            return
        if comment := pace.keep_alive(bool(rows)):
            yield comment
        if not await pace.wait():
            return


class WeightsNotKept(LookupError):
    """The job has no weights yet, or not the version asked for."""


async def weights(svc: Services, rec: JobRecord, version: int | None) -> tuple[bytes, int]:
    """The policy's safetensors blob of ``version`` (the latest when None), and that version."""
    if rec.version is None:
        raise WeightsNotKept(f"job {rec.id} has no weights yet")
    version = rec.version if version is None else version
    blob = await svc.redis.get(params_key(rec.id, version))
    if blob is None:
        raise WeightsNotKept(f"job {rec.id}: version {version} is not kept "
                             f"(the latest is {rec.version})")
    return blob, version


async def model_file(svc: Services, rec: JobRecord, version: int | None, format: ModelFormat
                     ) -> tuple[bytes, int]:
    """:func:`weights` in ``format``; ONNX is built off the event loop (a CNN's takes tens
    of milliseconds)."""
    blob, version = await weights(svc, rec, version)
    if format == "onnx":
        blob = await asyncio.to_thread(to_onnx, blob)
    return blob, version


class NoVideo(LookupError):
    """The job has no video of that index."""


def videos(svc: Services, job_id: str) -> list[VideoFile]:
    return listed(svc.jobs.videos(job_id))


def video_file(svc: Services, job_id: str, n: int) -> Path:
    """The mp4 of the job's video ``n``."""
    path = video_path(svc.jobs.videos(job_id), n)
    if not path.is_file():
        raise NoVideo(f"job {job_id} has no video {n}")
    return path


async def play(svc: Services, rec: JobRecord, version: int | None) -> VideoFile | str:
    """Record one episode of the job's model ``version`` (the latest when None) now; or why
    its env cannot be recorded."""
    blob, version = await weights(svc, rec, version)
    made = await record_version(rec, blob, version, svc.jobs.checkpoints,
                                env_archive=await svc.redis.get(env_code_key(rec.id)),
                                episodes=1,
                                seed=evaluation_seeds(rec.spec.seed, "final", 1)[0],
                                source="play")
    return made if isinstance(made, str) else made[0]
