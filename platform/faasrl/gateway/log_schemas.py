"""Bodies of the logs routes (``routers/logs.py``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class InvocationLogOut(BaseModel):
    """One invocation's output, with what identifies it."""

    id: str
    function: str = Field(description="its function, as the caller's namespace names it")
    job: str | None = Field(None, description="the job it ran for; null: a plain invocation")
    status: str
    requested_at: float
    finished_at: float | None
    logs: str = Field(description="what it printed, logged and warned: the last 64 KB")


class ContainerLogOut(BaseModel):
    """What one of the function's containers wrote outside any invocation."""

    at: float = Field(description="epoch seconds it reached the gateway")
    container: str
    logs: str


class LogsOut(BaseModel):
    """Recent invocations' output, newest first, and the containers' own output."""

    invocations: list[InvocationLogOut]
    containers: list[ContainerLogOut] = Field(
        description="output of the function's containers outside any invocation (imports, "
                    "threads between runs), oldest first, kept for the gateway's "
                    "container_logs_minutes; empty for a job's logs")
