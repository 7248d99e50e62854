"""Jobs in Redis: one record per job, its metrics rows, and an index by creation time."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from redis.asyncio import Redis
from redis.exceptions import WatchError

from faasrl.data.keys import JOBS, job_metrics_key, job_pattern, job_record_key
from faasrl.env_code import EnvDescription
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.videos import VideoStatus
from faasrl.namespaces import DEFAULT

# paused: its namespace spent its daily quota (jobs/admission.py); it runs on by itself
JobStatus = Literal["pending", "running", "paused", "succeeded", "failed", "cancelled",
                    "interrupted"]
ACTIVE: tuple[str, ...] = ("pending", "running", "paused")
TARGET_REACHED = "target reward reached"  # how the stop reason of a job that reached it begins


def reached_target(stop_reason: str | None) -> bool:
    """Whether a job with this stop reason reached its target reward (a job that stopped on
    another bound ends ``succeeded`` too)."""
    return (stop_reason or "").startswith(TARGET_REACHED)


class Evaluation(BaseModel):
    version: int
    episodes: int
    first_seed: int | None = Field(None, description="episode i ran on env seed first_seed + i "
                                                     "(faasrl.rl.seeds); None: recorded before "
                                                     "evaluations named their seeds")
    mean: float
    std: float
    min: float
    max: float
    returns: list[float]


def policy_function(job_id: str, name: str | None = None) -> str:
    """The policy function serving a job: ``name``, else ``<job id>-policy``."""
    return name or f"{job_id}-policy"


class Serving(BaseModel):
    """Where the spec's ``serve`` rule last published the job's policy."""

    function: str = Field(description="the policy function (the job's namespace's)")
    alias: str
    function_version: int | None = Field(None, description="the newest function version "
                                                           "published")
    alias_version: int | None = Field(None, description="where the alias points: the newest "
                                                        "version, unless moved by hand since "
                                                        "(the rule then leaves it)")
    model_version: int | None = Field(None, description="the job's model version it serves")
    published_at: float | None = None
    error: str | None = Field(None, description="why the latest publication failed (the job "
                                                "trains on; the alias stays where it was)")


class JobRecord(BaseModel):
    id: str
    spec: JobSpec
    namespace: str = Field(DEFAULT, description="whose job it is")
    status: JobStatus = "pending"
    stop_reason: str | None = None
    held: str | None = Field(None, description="why a pending or paused job does not run now: "
                                               "the quota it waits for")
    error: str | None = None
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    round: int = Field(0, description="rounds completed")
    version: int | None = Field(None, description="the latest policy version")
    policy: dict[str, Any] | None = Field(None, description="the policy's PolicySpec")
    env_description: EnvDescription | None = Field(
        None, description="what the env's describe probe found at submit; None: submitted "
                          "before probes")
    env_steps: int = 0
    env_restarts: int = Field(0, description="actor slots whose envs started afresh after "
                                             "they had some (their episodes were cut short)")
    wall_s: float = Field(0.0, description="time spent running, restarts excluded")
    cost_usd: float = Field(0.0, description="serverless: actors + learner")
    serverful_cost_usd: float = Field(0.0, description="the same run on always-on VMs")
    parallel_wall_s: float = Field(0.0, description="modeled: wall_s had no invocation waited "
                                                    "for a core or capacity (jobs/parallel.py)")
    parallel_cost_usd: float = Field(0.0, description="modeled: cost_usd for those runs")
    recent_returns: list[float] = Field(default_factory=list)
    algorithm_state: dict[str, Any] = Field(
        default_factory=dict, description="what the algorithm carries from one update to the "
                                          "next (PPO: its adaptive kl_coef)")
    controller_state: dict[str, Any] = Field(default_factory=dict)
    parameter_state: dict[str, Any] = Field(
        default_factory=dict, description="async: the parameter function's aggregation-rule "
                                          "state at the last round end")
    replay_inserted: int = Field(0, description="off-policy: transitions the buffer function "
                                                "acknowledged (what a restore can lose)")
    last_row: dict[str, Any] | None = None
    confirmation: Evaluation | None = Field(
        None, description="the latest evaluation that tried to confirm a reached "
                          "target_reward, on the confirmation seeds")
    evaluation: Evaluation | None = Field(
        None, description="the final one, on held-out seeds at the job's end: what it reports")
    serving: Serving | None = Field(None, description="the spec's serve rule's latest "
                                                      "publication")
    video: VideoStatus | None = Field(
        None, description="the final evaluation's videos (spec evaluation.video), or why "
                          "there are none")

    @model_validator(mode="before")
    @classmethod
    def _kl_coef_is_algorithm_state(cls, data: Any) -> Any:
        """Records stored before issue 16 kept PPO's adaptive coefficient as ``kl_coef``."""
        if not isinstance(data, dict) or "kl_coef" not in data:
            return data
        data = {**data}
        kl_coef = data.pop("kl_coef")
        data.setdefault("algorithm_state", {"kl_coef": kl_coef})
        return data

    @property
    def recent_mean_return(self) -> float | None:
        r = self.recent_returns
        return sum(r) / len(r) if r else None


class JobStore:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def save(self, rec: JobRecord) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(job_record_key(rec.id), rec.model_dump_json())
            pipe.zadd(JOBS, {rec.id: rec.created_at})
            await pipe.execute()

    async def save_round(self, rec: JobRecord, row: dict[str, Any], index: int) -> None:
        """Append a round's row as row ``index`` and save the record that includes it,
        atomically. Idempotent: a retry after a lost reply finds the row there and does not
        append it twice."""
        rows = job_metrics_key(rec.id)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(rows)
                    have = await pipe.llen(rows)
                    pipe.multi()
                    if have <= index:
                        pipe.rpush(rows, json.dumps(row))
                    pipe.set(job_record_key(rec.id), rec.model_dump_json())
                    await pipe.execute()
                    return
                except WatchError:
                    continue

    async def get(self, job_id: str) -> JobRecord | None:
        raw = await self._redis.get(job_record_key(job_id))
        return None if raw is None else JobRecord.model_validate_json(raw)

    async def list(self) -> list[JobRecord]:
        ids = [i.decode() for i in await self._redis.zrange(JOBS, 0, -1)]
        if not ids:
            return []
        raws = await self._redis.mget([job_record_key(i) for i in ids])
        return [JobRecord.model_validate_json(r) for r in raws if r]

    async def rows(self, job_id: str, start: int = 0) -> list[dict[str, Any]]:
        return [json.loads(r) for r in await self._redis.lrange(job_metrics_key(job_id),
                                                                 start, -1)]

    async def delete(self, job_id: str) -> None:
        """Delete everything under the job's key prefix."""
        keys = [k async for k in self._redis.scan_iter(match=job_pattern(job_id),
                                                        count=500)]
        for i in range(0, len(keys), 500):
            await self._redis.delete(*keys[i:i + 500])
        await self._redis.zrem(JOBS, job_id)
