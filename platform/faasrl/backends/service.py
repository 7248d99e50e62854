"""Backends that are FaaS services themselves (AWS Lambda): they run invocations, not containers.

A container backend (``base.Backend``) hands the invoker containers to schedule; a service
backend takes the whole invocation and says how it went. The invoker sends a function's
invocations to one when the function (or the caller) places it there; the pool, capacity and
keep-alive play no part, because the service owns them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

from faasrl.manifest import FunctionSpec


@dataclass
class Outcome:
    """How one invocation went, in the fields the invoker writes into its record."""

    status: Literal["success", "error", "timeout"]
    result: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 1
    cold: bool = False
    queue_s: float = 0.0  # request to the start of the run: network, throttling back-off
    init_s: float = 0.0
    run_s: float = 0.0
    billed_ms: int = 0
    memory_mb: int | None = None  # what the service ran it with, when it says
    logs: str = ""  # what the function wrote (Lambda: its tail log, the framing lines left out)


class ServiceBackend(ABC):
    """A FaaS service that runs a function's invocations; ``name`` is also its placement."""

    name: str

    @abstractmethod
    async def invoke(self, spec: FunctionSpec, args: Any, timeout_s: float) -> Outcome:
        """Run one invocation to its end, retrying what the service's error model allows."""

    @abstractmethod
    def prewarm(self, spec: FunctionSpec, n: int) -> None:
        """Get ready for ``n`` concurrent invocations of the function (clients, threads)."""

    @abstractmethod
    async def close(self) -> None:
        """Wait for nothing; release clients and threads."""
