"""What the routers work with, built once per gateway in the app's lifespan.

Routers parse a request, call the invoker's query methods or a service function of this
package (``functions``, ``invocations``, ``cluster``) and shape the answer; what a request does
beyond one call is written in the service, once for every router that needs it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from faasrl.config import Settings
from faasrl.gateway.async_events import DeadLetterStore, EventStore
from faasrl.gateway.keys import KeyStore
from faasrl.gateway.memory import MemoryWatch
from faasrl.invoker import Invoker, RecordStore
from faasrl.invoker.registry import Catalog, CodeStore, FunctionRegistry, VersionRegistry
from faasrl.job_manager import JobManager


@dataclass
class Services:
    settings: Settings
    redis: Redis
    invoker: Invoker
    functions: FunctionRegistry
    records: RecordStore
    metrics: CollectorRegistry
    jobs: JobManager
    code: CodeStore
    memory: MemoryWatch
    keys: KeyStore
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    @cached_property
    def events(self) -> EventStore:
        """Asynchronous invocations not finished yet (``gateway/async_events.py``)."""
        return EventStore(self.redis)

    @cached_property
    def versions(self) -> Catalog:
        """Functions' published versions and aliases (``services/versions.py``)."""
        return Catalog(VersionRegistry(self.redis))

    @cached_property
    def dead_letters(self) -> DeadLetterStore:
        return DeadLetterStore(self.redis)

    def spawn(self, coro: Any) -> None:
        """Run a task the gateway owns (cancelled, and its record written, on shutdown)."""
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)


async def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
