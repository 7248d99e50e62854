"""A job's videos: where they live (``<checkpoints>/<job>/videos/<n>.mp4`` and a JSON
sidecar each, so deleting the job deletes them), what the job record says of them, and the
recorder process that makes them (:mod:`faasrl.jobs.recorder`, torch and the env kept out of
this process)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from faasrl.env_code import EnvCode

if TYPE_CHECKING:
    from faasrl.jobs.store import JobRecord

VIDEOS = "videos"  # the folder under the job's checkpoint folder
RECORD_TIMEOUT_S = 300.0  # a recording that takes longer is stopped and reported


class VideoFile(BaseModel):
    """One recorded episode."""

    n: int = Field(description="its index among the job's videos (GET .../videos/{n})")
    version: int = Field(description="the model version that played")
    seed: int = Field(description="the env seed the episode reset with")
    source: Literal["evaluation", "play"]
    frames: int
    width: int
    height: int
    fps: int
    episode_return: float


class VideoStatus(BaseModel):
    """What became of the final evaluation's videos."""

    status: Literal["recorded", "unavailable", "failed"]
    message: str | None = Field(None, description="why there is no video")
    videos: list[int] = Field(default_factory=list, description="their indices")


class Recording(BaseModel):
    """What the recorder process is asked (its stdin)."""

    algorithm: str
    hyperparameters: dict[str, Any]
    policy: dict[str, Any]
    env_id: str
    env: EnvCode | None
    env_archive: Path | None = Field(None, description="the env's code archive, installed "
                                                       "before it is made")
    model_path: Path
    version: int
    folder: Path
    episodes: int
    seed: int
    first_index: int
    source: Literal["evaluation", "play"]


class RecordingFailed(Exception):
    """The recorder process ended without videos and without saying why none can be made."""


def folder(checkpoints: Path, job_id: str) -> Path:
    return checkpoints / job_id / VIDEOS


def video_path(videos: Path, n: int) -> Path:
    return videos / f"{n}.mp4"


def sidecar(videos: Path, n: int) -> Path:
    return videos / f"{n}.json"


def listed(videos: Path) -> list[VideoFile]:
    """The job's videos, in order."""
    if not videos.is_dir():
        return []
    found = [VideoFile.model_validate_json(p.read_text()) for p in videos.glob("*.json")]
    return sorted(found, key=lambda v: v.n)


def next_index(videos: Path) -> int:
    return max((v.n for v in listed(videos)), default=-1) + 1


async def record(req: Recording, progress: Callable[[int], None] | None = None
                 ) -> list[VideoFile] | str:
    """Run the recorder: the videos made, or why the env cannot be recorded. The model blob
    travels as a file (``req.model_path``), the request as JSON."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "faasrl.jobs.recorder", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(req.model_dump_json().encode())
    proc.stdin.close()
    outcome: list[VideoFile] | str | None = None
    try:
        async with asyncio.timeout(RECORD_TIMEOUT_S):
            async for raw in proc.stdout:
                line = json.loads(raw)
                if "frames" in line and progress is not None:
                    progress(line["frames"])
                elif "videos" in line:
                    outcome = [VideoFile.model_validate(v) for v in line["videos"]]
                elif "unavailable" in line:
                    outcome = line["unavailable"]
            err = await proc.stderr.read()
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RecordingFailed(f"the recording took over {RECORD_TIMEOUT_S:.0f} s") from None
    if outcome is None:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise RecordingFailed("the recorder failed: " + " | ".join(tail))
    return outcome


async def record_version(rec: JobRecord, blob: bytes, version: int, checkpoints: Path, *,
                         env_archive: bytes | None, episodes: int, seed: int,
                         source: Literal["evaluation", "play"],
                         progress: Callable[[int], None] | None = None
                         ) -> list[VideoFile] | str:
    """Record ``episodes`` episodes of the job's model ``version`` (its safetensors ``blob``)
    after the job's videos so far; or say why its env cannot be recorded. ``env_archive``:
    the code of an env brought as code (its packages must be installed where this runs)."""
    if importlib.util.find_spec("torch") is None:
        return ("this gateway has no torch (the platform image): videos are recorded by a "
                "gateway installed with faasrl's RL packages")
    if rec.spec.env is not None and env_archive is None:
        return "the env's code archive is gone"
    if rec.policy is None:
        return "the job has no policy yet"
    videos = folder(checkpoints, rec.id)
    videos.mkdir(parents=True, exist_ok=True)
    model = videos / f".v{version}-{source}.safetensors"
    model.write_bytes(blob)
    archive = None if env_archive is None else videos / f".env-{source}.tar"
    if archive is not None:
        archive.write_bytes(env_archive)
    try:
        return await record(Recording(
            algorithm=rec.spec.algorithm,
            hyperparameters=rec.spec.hyperparameters.model_dump(mode="json"),
            policy=rec.policy, env_id=rec.spec.env_id, env=rec.spec.env, env_archive=archive,
            model_path=model,
            version=version, folder=videos, episodes=episodes, seed=seed,
            first_index=next_index(videos), source=source), progress)
    finally:
        model.unlink(missing_ok=True)
        if archive is not None:
            archive.unlink(missing_ok=True)
