"""Request and response bodies of the REST API (the function manifest is ``FunctionSpec``),
its path parameters and the error answers routes document."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, Field, ValidationError

from faasrl.backends.base import ZygoteState
from faasrl.data.keys import JOB_ID
from faasrl.gateway.errors import FieldError
from faasrl.manifest import FUNCTION_NAME, FunctionSpec
from faasrl.namespaces import DEFAULT
from faasrl.user_input import STRICT, Integer

# Path parameters, each checked where the route declares it (so OpenAPI shows the pattern and a
# bad one is a 422 naming it) with the pattern of what it names: one definition each.
INVOCATION_ID = r"^[0-9a-f]{32}$"  # uuid4().hex, as faasrl.invoker.invoker.new_invocation_id
FunctionName = Annotated[str, Path(pattern=FUNCTION_NAME, description="a function's name")]
JobId = Annotated[str, Path(pattern=JOB_ID.pattern, description="a job's id")]
InvocationId = Annotated[str, Path(pattern=INVOCATION_ID, description="an invocation's id")]



class InvokeRequest(BaseModel):
    model_config = STRICT

    args: Any = Field(None, description="any JSON value; the handler's first argument")
    timeout_s: float | None = Field(None, gt=0, description="shorter than the function's own")
    affinity: str | None = Field(None, min_length=1, max_length=200,
                                 description="prefer the warm container that last ran this key")


class InvocationOut(BaseModel):
    id: str
    function: str
    status: Literal["queued", "running", "success", "error", "timeout"]
    cold: bool
    stem_cell: bool = False
    attempts: int
    queue_s: float
    init_s: float
    run_s: float
    cpu_s: float | None = Field(None, description="the function process's CPU seconds during "
                                                  "the run; null: not measured (Lambda)")
    wait_s: float | None = Field(None, description="of run_s, seconds its thread waited for a "
                                                   "core; null: not measured")
    billed_ms: int
    memory_mb: int
    cores: float | None = Field(None, description="the cores its run had, of a function that "
                                                  "may be lent more (cpu_max); null: its cpu")
    backend: str
    container: str | None
    node: str | None = Field(None, description="the Ray node its container ran on; null: the "
                                               "gateway's host")
    job: str | None = Field(None, description="the job it ran for; null: a plain invocation")
    namespace: str = Field(DEFAULT, description="the namespace it was made in (for a job's "
                                                "calls of built-in functions, the job's)")
    requested_at: float
    finished_at: float | None
    result: Any = None
    error: dict[str, Any] | None = None
    retry_of: str | None = Field(None, description="on an asynchronous invocation's retry: "
                                                   "the id it was accepted under")
    retried_by: str | None = Field(None, description="on a failed asynchronous attempt that "
                                                     "is retried: the next attempt's id")
    version: int | None = Field(None, description="the published version that answered; "
                                                  "null: $LATEST")


class InvocationAccepted(BaseModel):
    id: str
    status: Literal["queued"]


class RedriveRequest(BaseModel):
    """Which dead letters to invoke again: one by ``id``, or ``all``."""

    model_config = STRICT

    id: str | None = Field(None, pattern=INVOCATION_ID, description="a dead letter's id")
    all: bool = Field(False, description="every dead letter of the function")


class Redriven(BaseModel):
    dead_letter: str
    invocation: str = Field(description="the new asynchronous invocation's id")


class RedriveOut(BaseModel):
    redriven: list[Redriven]


class PrewarmRequest(BaseModel):
    model_config = STRICT

    count: Integer = Field(ge=0, le=1024, description="containers the function should have")


class PrewarmResult(BaseModel):
    started: int
    containers: int


class ResourcesOut(BaseModel):
    cpu: float
    memory_mb: int
    gpus: float = Field(description="GPUs; fractional containers hold parts of one")


class ContainerOut(BaseModel):
    id: str
    state: str
    inflight: int
    served: int
    age_s: float
    idle_s: float | None
    gpus: list[int]
    pid: int | None
    node: str | None = Field(None, description="the Ray node it runs on; null: the gateway's "
                                               "host")
    endpoint: str | None
    memory_mb: float | None
    cpu_s: float | None


class FunctionPoolOut(BaseModel):
    queued: int
    containers: list[ContainerOut]


class FunctionStatsOut(BaseModel):
    """A function's recent invocations summed up (what its dashboard row shows), and its
    containers now."""

    function: str
    invocations: int = Field(description="finished invocations looked at: the most recent, "
                                         "up to the request's window")
    warm: int
    cold: int = Field(description="invocations that waited for a container start")
    errors: int = Field(description="ended in an error (the handler's or the platform's)")
    timeouts: int
    run_p50_s: float | None = Field(description="the handler's run time; None: no invocation")
    run_p99_s: float | None
    latency_p50_s: float | None = Field(description="queue (a cold start included) + run")
    latency_p99_s: float | None
    billed_ms: int = Field(description="summed over the invocations looked at")
    queued: int = Field(description="invocations waiting for a container now")
    containers: dict[str, int] = Field(description="containers now, by state")


class StemCellsOut(BaseModel):
    starting: int
    ready: int


class ClusterOut(BaseModel):
    backend: str
    capacity: ResourcesOut
    reserved: ResourcesOut
    free: ResourcesOut
    functions: dict[str, FunctionPoolOut]
    stem_cells: dict[str, StemCellsOut] = Field(
        default_factory=dict, description="generic containers kept ready per image (\"\": the "
                                          "backend's default image), Docker backend")
    zygote: ZygoteState | None = Field(
        None, description="the process backend's zygote, which cold starts fork from: "
                          "importing, ready (forks), gone (starts anew with the next cold "
                          "start), failed (a failed import left it unfit to fork: containers "
                          "start as new interpreters) or off; null: the backend has none")
    zygote_not_preloaded: dict[str, str] = Field(
        default_factory=dict, description="the modules the zygote could not import, and why "
                                          "(a function importing them does so itself)")


class MemoryOut(BaseModel):
    """Memory in use against its limits (``gateway/memory.py: MemoryWatch``)."""

    state: Literal["ok", "shedding"] = Field(
        description="shedding: new async invocations and pre-warming are refused (503) and "
                    "records leaving Redis are not archived")
    shed_at: float = Field(description="the share of a limit in use past which it sheds")
    shares: dict[str, float] = Field(
        description="the share in use of each limit there is: redis (of its maxmemory), node")
    redis_used_mb: float
    redis_max_mb: float | None = Field(description="Redis's maxmemory; null: none set")
    node_available_mb: float
    node_total_mb: float


class ArchiveOut(BaseModel):
    max_mb: float = Field(description="the archive's files at most")
    days: float = Field(description="how long it keeps a record")
    oldest_hour_utc: str | None = Field(
        description="the hour (YYYYmmddTHH) its oldest records left Redis in; null: none yet")
    writing: bool = Field(description="false while memory is short: records are not archived")


class RecordsOut(BaseModel):
    """What invocation records take of Redis, what bounds them, and what the archive keeps."""

    in_redis: int
    redis_mb: float = Field(description="what they cost Redis (estimated)")
    redis_max_mb: float
    ttl_s: int
    archived: int = Field(description="records that left Redis for the archive since start")
    discarded: int = Field(description="records that left Redis for no archive since start")
    archive: ArchiveOut | None = Field(description="null: records are not archived")


class HealthOut(BaseModel):
    status: str
    version: str
    redis: str
    memory: MemoryOut
    records: RecordsOut


class ErrorDetail(BaseModel):
    type: str
    message: str
    fields: dict[str, str] | None = None
    invocation: str | None = Field(None, description="a handler's refusal (InvalidArgs): the "
                                                     "invocation's id, whose record is kept")


class ErrorOut(BaseModel):
    error: ErrorDetail


class FunctionUpdate(FunctionSpec):
    """A manifest for ``PUT /v1/functions/{name}``: the path names the function, so ``name``
    may be left out; given, it must be the path's."""

    name: str | None = Field(None, pattern=FUNCTION_NAME,
                             description="the path's name when left out; given, must equal it")

    def named(self, name: str) -> FunctionSpec:
        """The manifest under the path's name (``FieldError``: a check that needs the name,
        such as a destination naming the function itself, fails)."""
        try:
            return FunctionSpec.model_validate({**self.model_dump(exclude_unset=True),
                                                "name": name})
        except ValidationError as exc:
            raise FieldError({".".join(str(p) for p in e["loc"]): e["msg"]
                              for e in exc.errors()}) from None


def _errors(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


# Error answers, for routes' ``responses=``.
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _errors("the body is not valid JSON (type InvalidJSON)"),
    413: _errors("the body is larger than the gateway's FAASRL_MAX_PAYLOAD_BYTES")}
# A synchronous invoke: a handler may refuse an argument too (faasrl.runtime.invalid).
INVOKE_BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    **BODY_ERRORS, 400: _errors("the body is not valid JSON (type InvalidJSON), or the handler "
                                "refused an argument (type InvalidArgs, ``fields`` names it)")}
# FastAPI documents its own HTTPValidationError otherwise: the gateway answers this body instead.
INVALID_INPUT: dict[int | str, dict[str, Any]] = {
    422: _errors("a path, query, header or body field is invalid: fields names each "
                 "(type ValidationError)")}
REDIS_ERRORS: dict[int | str, dict[str, Any]] = {
    503: {**_errors("Redis is unreachable (type RedisUnavailable)"), "headers": {
        "Retry-After": {"description": "seconds to wait before retrying",
                        "schema": {"type": "integer"}}}}}


class CodeOut(BaseModel):
    sha256: str = Field(description="name the archive by this in a manifest's code_sha256")
    bytes: int
    files: int


class ServeRequest(BaseModel):
    """``POST /v1/jobs/{id}/serve``: which version of the job's model, under which name."""

    model_config = STRICT

    version: Integer | None = Field(None, ge=0, description="a kept version; null: the latest")
    name: str | None = Field(None, pattern=FUNCTION_NAME,
                             description="the function's name; null: '<job id>-policy'")


class MetricColumnOut(BaseModel):
    name: str = Field(description="the column's name in the rows (JSON keys, the CSV header)")
    namespaced: str = Field(description="its name with ?columns=v2: group/name")
    group: str = Field(description="common, workflow, algo, controller or cost")
    description: str
    unit: str = Field(description="s, USD, B, steps; empty: a count or a ratio")


class ServeOut(BaseModel):
    function: str = Field(description="invoke it by this name")
    job: str
    version: int = Field(description="the model version it serves")
    replaced: bool = Field(description="a function of that name was replaced")
