"""Request and response bodies of the REST API (the function manifest is ``FunctionSpec``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class InvokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: Any = Field(None, description="any JSON value; the handler's first argument")
    timeout_s: float | None = Field(None, gt=0, description="shorter than the function's own")
    affinity: str | None = Field(None, min_length=1, max_length=200,
                                 description="prefer the warm container that last ran this key")


class InvocationOut(BaseModel):
    id: str
    function: str
    status: Literal["queued", "running", "success", "error", "timeout"]
    cold: bool
    attempts: int
    queue_s: float
    init_s: float
    run_s: float
    billed_ms: int
    memory_mb: int
    backend: str
    container: str | None
    requested_at: float
    finished_at: float | None
    result: Any = None
    error: dict[str, Any] | None = None


class InvocationAccepted(BaseModel):
    id: str
    status: Literal["queued"]


class PrewarmRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=0, le=1024, description="containers the function should have")


class PrewarmResult(BaseModel):
    started: int
    containers: int


class ResourcesOut(BaseModel):
    cpu: float
    memory_mb: int
    gpus: int


class ContainerOut(BaseModel):
    id: str
    state: str
    inflight: int
    served: int
    age_s: float
    idle_s: float | None
    gpus: list[int]
    pid: int | None
    endpoint: str | None
    memory_mb: float | None
    cpu_s: float | None


class FunctionPoolOut(BaseModel):
    queued: int
    containers: list[ContainerOut]


class ClusterOut(BaseModel):
    backend: str
    capacity: ResourcesOut
    reserved: ResourcesOut
    free: ResourcesOut
    functions: dict[str, FunctionPoolOut]


class HealthOut(BaseModel):
    status: str
    version: str
    redis: str


class ErrorDetail(BaseModel):
    type: str
    message: str
    fields: dict[str, str] | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


class CodeOut(BaseModel):
    sha256: str = Field(description="name the archive by this in a manifest's code_sha256")
    bytes: int
    files: int
