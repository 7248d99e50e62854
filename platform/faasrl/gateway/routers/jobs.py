"""Training jobs: submit, list, inspect, follow (server-sent events), download, serve, videos,
cancel, resume."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import (
    APIRouter,
    Depends,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    status,
)
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel, BeforeValidator, Field

from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import (
    BODY_ERRORS,
    INVALID_INPUT,
    REDIS_ERRORS,
    ErrorOut,
    JobId,
    MetricColumnOut,
    ServeOut,
    ServeRequest,
)
from faasrl.gateway.services import ServicesDep, jobs, serving
from faasrl.job_manager import JobConflict, JobNotFound
from faasrl.jobs.errors import InvalidJobField
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord
from faasrl.jobs.videos import RecordingFailed, VideoFile
from faasrl.rl.onnx_export import NotExportable

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut},
                              **INVALID_INPUT, **REDIS_ERRORS})


def _absent_if_null(value: str | None) -> str | None:
    """A client that keeps no last id may still send the header, as ``null`` or empty."""
    return None if value in ("null", "") else value


async def _get(svc: ServicesDep, job_id: str, principal: PrincipalDep) -> JobRecord:
    """The caller's namespace's job; 404 for another namespace's, as for none."""
    try:
        return await jobs.owned(svc, job_id, principal.namespace)
    except JobNotFound as exc:
        raise HTTPException(404, str(exc)) from None


@router.post("", response_model=JobRecord, status_code=status.HTTP_201_CREATED,
             responses=BODY_ERRORS)
async def submit(spec: JobSpec, svc: ServicesDep, principal: PrincipalDep) -> JobRecord:
    """Start a training job; hyper-parameters left out take defaults for the env's family.
    Its functions are the caller's namespace's of those names, else the built-in ones."""
    try:
        return jobs.shown(await svc.jobs.submit(spec, principal.namespace))
    except InvalidJobField as exc:
        raise FieldError({exc.field: str(exc)}) from None


@router.get("", response_model=list[JobRecord])
async def list_jobs(svc: ServicesDep, principal: PrincipalDep) -> list[JobRecord]:
    """The caller's namespace's jobs."""
    return [jobs.shown(rec) for rec in await svc.jobs.list()
            if rec.namespace == principal.namespace]


@router.get("/columns", response_model=list[MetricColumnOut])
async def metric_columns() -> list[MetricColumnOut]:
    """The metrics rows' named columns: name, group, meaning and unit (the dashboard draws its
    charts by these names). A column a row has that is not listed is its algorithm's own."""
    return jobs.metric_columns()


@router.get("/{job_id}", response_model=JobRecord)
async def get_job(job_id: JobId, svc: ServicesDep, principal: PrincipalDep) -> JobRecord:
    """Status, round, latest metrics row (``last_row``), cost, the latest target
    confirmation (``confirmation``) and the final evaluation on held-out seeds
    (``evaluation``)."""
    return jobs.shown(await _get(svc, job_id, principal))


# CSV first: a generated client reads the first media type it knows, and text reads both
# formats (JSON's as its text), where a JSON decoder would choke on the CSV.
METRICS_CONTENT = {"text/csv": {"schema": {"type": "string"}},
                   "application/json": {"schema": {"type": "array",
                                                   "items": {"type": "object"}}}}


@router.get("/{job_id}/metrics", response_class=Response,
            responses={200: {"description": "the rows", "content": METRICS_CONTENT}})
async def metrics(job_id: JobId, svc: ServicesDep, principal: PrincipalDep,
                  format: Annotated[Literal["json", "csv"], Query()] = "json",
                  columns: Annotated[jobs.ColumnNames, Query(
                      description="v1: the rows' names; v2: group/name (GET /v1/jobs/columns)",
                  )] = "v1") -> Response:
    """One row per round, as JSON or CSV."""
    await _get(svc, job_id, principal)
    rows = jobs.named(await svc.jobs.store.rows(job_id), columns)
    if format == "json":
        return Response(json.dumps(rows), media_type="application/json")
    return Response(jobs.metrics_csv(rows), media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{job_id}.csv"'})


@router.get("/{job_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def events(job_id: JobId, request: Request, svc: ServicesDep, principal: PrincipalDep,
                 last_event_id: Annotated[int | None, Header(ge=0),
                                          BeforeValidator(_absent_if_null)] = None
                 ) -> StreamingResponse:
    """Server-sent events: ``round`` (a metrics row, ``id`` = its index) as each round ends,
    then ``end`` (the job record) when the job is no longer active. Reconnect with
    ``Last-Event-ID`` to continue after the last row received. If Redis becomes unreachable,
    the stream sends ``error`` (an error body, and a ``retry`` hint) and ends: reconnect."""
    await _get(svc, job_id, principal)
    start = 0 if last_event_id is None else last_event_id + 1
    stream = jobs.events(svc, job_id, start, closing=lambda: request.app.state.closing,
                         disconnected=request.is_disconnected)
    return StreamingResponse(stream, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/{job_id}/model", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}},
                       409: {"model": ErrorOut}})
async def model(job_id: JobId, svc: ServicesDep, principal: PrincipalDep,
                version: Annotated[int | None, Query(ge=0)] = None,
                format: Annotated[jobs.ModelFormat, Query()] = "safetensors") -> Response:
    """The policy's weights as safetensors, described in its metadata (rl/model_card.py:
    algorithm, env, observation formula, action space, forward pass; ``version``), or with
    ``format=onnx`` its acting network as ONNX, the observation's preprocessing in the graph
    and the card in its metadata_props (rl/onnx_export.py); the latest version unless
    ``version`` is given."""
    rec = await _get(svc, job_id, principal)
    try:
        blob, version = await jobs.model_file(svc, rec, version, format)
    except jobs.WeightsNotKept as exc:
        raise HTTPException(404, str(exc)) from None
    except NotExportable as exc:
        raise HTTPException(409, str(exc)) from None
    return Response(blob, media_type="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="{job_id}-v{version}.{format}"',
        "X-Faasrl-Version": str(version)})


@router.post("/{job_id}/serve", response_model=ServeOut, responses={
    409: {"model": ErrorOut, "description": "the job has published no weights yet"},
    **BODY_ERRORS})
async def serve(job_id: JobId, svc: ServicesDep, principal: PrincipalDep,
                body: ServeRequest | None = None) -> ServeOut:
    """Deploy the built-in policy function serving a version of the job's model (the latest
    unless ``version``) in the job's namespace, as ``name`` (``<job id>-policy`` unless given);
    invoke it with ``{"obs": ...}`` like any function. Again with the same name: replaced."""
    rec = await _get(svc, job_id, principal)
    try:
        return await serving.serve(svc, rec, body or ServeRequest())
    except serving.NothingToServe as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/{job_id}/videos", response_model=list[VideoFile])
async def list_videos(job_id: JobId, svc: ServicesDep, principal: PrincipalDep
                      ) -> list[VideoFile]:
    """The job's videos: its final evaluation's (spec ``evaluation.video``) and those played
    on demand (``POST .../play``), in order."""
    await _get(svc, job_id, principal)
    return jobs.videos(svc, job_id)


@router.get("/{job_id}/videos/{n}", response_class=FileResponse,
            responses={200: {"content": {"video/mp4": {}}}, 206: {"content": {"video/mp4": {}}}})
async def video(job_id: JobId, n: Annotated[int, Path(ge=0)], svc: ServicesDep,
                principal: PrincipalDep) -> FileResponse:
    """Video ``n`` as H.264 mp4; ``Range`` requests get their part (206), as players seek."""
    await _get(svc, job_id, principal)
    try:
        path = jobs.video_file(svc, job_id, n)
    except jobs.NoVideo as exc:
        raise HTTPException(404, str(exc)) from None
    return FileResponse(path, media_type="video/mp4", filename=f"{job_id}-{n}.mp4",
                        content_disposition_type="inline")


class PlayIn(BaseModel):
    version: int | None = Field(None, ge=0, description="a kept model version; None: the "
                                                        "latest")


@router.post("/{job_id}/play", response_model=VideoFile, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorOut}, **BODY_ERRORS})
async def play(job_id: JobId, body: PlayIn, svc: ServicesDep, principal: PrincipalDep
               ) -> VideoFile:
    """Record one episode of a stored model version now (its deterministic action, on the
    job's env, the final evaluation's first seed); the answer is the new video. 409 when the
    env cannot be recorded, saying why."""
    rec = await _get(svc, job_id, principal)
    try:
        made = await jobs.play(svc, rec, body.version)
    except jobs.WeightsNotKept as exc:
        raise HTTPException(404, str(exc)) from None
    except RecordingFailed as exc:
        raise HTTPException(409, str(exc)) from None
    if isinstance(made, str):
        raise HTTPException(409, f"no video: {made}")
    return made


@router.post("/{job_id}/cancel", response_model=JobRecord, responses={409: {"model": ErrorOut}})
async def cancel(job_id: JobId, svc: ServicesDep, principal: PrincipalDep) -> JobRecord:
    """Stop a job now (its round in progress is abandoned); its data stays, so it can be
    resumed from its last completed round."""
    await _get(svc, job_id, principal)
    try:
        return jobs.shown(await svc.jobs.cancel(job_id))
    except JobConflict as exc:
        raise HTTPException(409, str(exc)) from None


@router.post("/{job_id}/resume", response_model=JobRecord, responses={409: {"model": ErrorOut}})
async def resume(job_id: JobId, svc: ServicesDep, principal: PrincipalDep) -> JobRecord:
    """Continue a cancelled, failed or interrupted job from its last saved round."""
    await _get(svc, job_id, principal)
    try:
        return jobs.shown(await svc.jobs.resume(job_id))
    except JobConflict as exc:
        raise HTTPException(409, str(exc)) from None


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete(job_id: JobId, svc: ServicesDep, principal: PrincipalDep) -> Response:
    """Stop the job if it runs, then delete all its data (Redis keys, checkpoints)."""
    await _get(svc, job_id, principal)
    await svc.jobs.delete(job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
