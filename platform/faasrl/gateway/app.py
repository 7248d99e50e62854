"""The gateway application: wires Redis, the backend and the invoker, then serves the routers."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis
from redis.exceptions import RedisError

import faasrl
from faasrl.backends import create_backend, create_services
from faasrl.config import Settings
from faasrl.data import acl
from faasrl.data.connection import gateway_redis, without_credentials
from faasrl.data.health import RedisHealth
from faasrl.gateway.errors import BodyLimit, install_error_handlers
from faasrl.gateway.keys import KeyStore
from faasrl.gateway.memory import MB, MemoryCollector, MemoryWatch
from faasrl.gateway.routers import (
    cluster,
    code,
    dead_letters,
    functions,
    invocations,
    jobs,
    lambda_api,
    lambda_versions,
    logs,
    namespaces,
    system,
    ui,
    versions,
)
from faasrl.gateway.services import Services, events, quotas
from faasrl.gateway.services import functions as function_service
from faasrl.gateway.services import namespaces as namespace_service
from faasrl.gateway.services import serving as serving_service
from faasrl.gateway.services import versions as version_service
from faasrl.invoker import Invoker, InvokerConfig, Pool, RecordStore
from faasrl.invoker.metrics import InvokerMetrics, PoolCollector, RecordCollector
from faasrl.invoker.record_archive import RecordArchive
from faasrl.invoker.registry import CodeStore, FunctionRegistry
from faasrl.job_manager import JobManager
from faasrl.jobs import JobStore
from faasrl.jobs.env_probe import EnvProbe
from faasrl.jobs.prometheus import JobCollector
from faasrl.resources import node_capacity

log = logging.getLogger(__name__)
SHUTDOWN_STEP_S = 30.0  # the most one shutdown step may take
# FastAPI's OpenTelemetry hooks: faasrl exports Prometheus metrics instead. Left on, every request
# asks OpenTelemetry for its providers (environment lookups included): 12 us of an invoke's 45.
_NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def create_app(settings: Settings, redis_url: str, function_redis_url: str | None = None
               ) -> FastAPI:
    """A gateway over the Redis at ``redis_url`` (the embedded one is started by the caller).

    ``function_redis_url``: the same Redis as function containers reach it, when that differs
    (``settings.function_redis_url`` wins over it; both default to ``redis_url``). Functions
    get it without credentials: they authenticate as their job's ACL user.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = gateway_redis(redis_url)
        await redis.ping()
        await _warn_if_open(redis)
        health = RedisHealth(redis)
        await health.start()
        # Served policies' users: Redis keeps ACL users in memory only.
        await acl.regrant_serving(redis)
        health.on_recovery(lambda: acl.regrant_serving(redis))
        backend = create_backend(settings)
        if (capacity := backend.capacity()) is not None:  # a cluster's, not this host's
            gpu_ids: list[int] = list(range(int(capacity.gpus)))
        else:
            capacity, gpu_ids = node_capacity(settings.node_cpu, settings.node_memory_mb,
                                              settings.node_gpus)
        pool = Pool(capacity, gpu_ids, max_queue=settings.max_queue,
                    queue_timeout_s=settings.queue_timeout_s,
                    stem_cells=settings.stem_cells if backend.has_stem_cells else 0,
                    stem_memory_mb=settings.stem_cell_memory_mb)
        registry = CollectorRegistry()
        registry.register(PoolCollector(lambda: pool))
        archive = None
        if settings.record_archive:
            archive = RecordArchive(settings.record_archive_dir,
                                    int(settings.record_archive_mb * MB),
                                    settings.record_archive_days * 86400)
            archive.start()
        records = RecordStore(redis, settings.record_ttl_s,
                              spool=settings.state_dir / "records.spool",
                              max_bytes=int(settings.record_max_mb * MB),
                              max_count=settings.record_max_count, archive=archive)
        registry.register(RecordCollector(lambda: records))
        code_store = CodeStore(redis)
        await records.start()

        def shed_archiving(shedding: bool) -> None:
            records.archiving = not shedding

        memory = MemoryWatch(redis, settings.memory_shed_at, on_change=shed_archiving)
        await memory.start()
        registry.register(MemoryCollector(lambda: memory))
        invoker = Invoker(
            backend, pool, records=records,
            metrics=InvokerMetrics(registry),
            config=InvokerConfig(start_timeout_s=settings.start_timeout_s,
                                 stop_grace_s=settings.stop_grace_s,
                                 timeout_grace_s=settings.timeout_grace_s,
                                 maintain_interval_s=settings.maintain_interval_s,
                                 container_logs_s=settings.container_logs_minutes * 60),
            runtime_env={"FAASRL_REDIS_URL": without_credentials(
                settings.function_redis_url or function_redis_url or redis_url)},
            code=code_store.get,
            services=create_services(settings, redis_url))
        await invoker.start()
        registrations = FunctionRegistry(redis)
        await function_service.restore(
            invoker, registrations, settings.functions_dir if settings.register_builtins else None)
        probe = EnvProbe(invoker, redis, code_store, settings.env_probe_timeout_s,
                         backend.layer_store)
        manager = JobManager(JobStore(redis), invoker, redis, settings.state_dir / "jobs",
                             probe, settings.scheduler_folder, health=health,
                             outage_max_s=settings.redis_outage_max_s)
        registry.register(JobCollector(manager.running))
        keys = KeyStore(redis)
        await keys.load()
        svc = Services(settings, redis, invoker, registrations, records, registry, manager,
                       code_store, memory, keys)
        app.state.services = svc
        manager.publish = partial(serving_service.publish_to_alias, svc)
        await version_service.restore(svc)
        svc.spawn(namespace_service.write_key_use(keys))
        quotas.apply_all(svc)  # before jobs resume: they are held to them too
        if settings.resume_jobs:
            await manager.start()
        await events.resume(svc)  # asynchronous invocations an earlier gateway left
        log.info("gateway up: %s backend, capacity %s, %d functions", settings.backend,
                 capacity, len(invoker.functions()))
        try:
            yield
        finally:
            for task in list(svc.background):
                task.cancel()
            await _step("background tasks",
                        asyncio.gather(*svc.background, return_exceptions=True))
            await _step("keys' last use", namespace_service.flush_key_use(keys))
            await _step("job drivers", manager.close())
            await _step("containers", invoker.close())
            await _step("invocation records", records.close())
            if archive is not None:
                await _step("record archive", asyncio.to_thread(archive.close))
            await _step("memory watch", memory.close())
            await _step("Redis health", health.close())
            await redis.aclose()

    app = FastAPI(title="faasrl", version=faasrl.__version__, lifespan=lifespan,
                  telemetry=_NO_TELEMETRY,
                  description="A serverless-style FaaS platform for distributed deep RL.")
    app.state.settings = settings
    app.state.closing = False  # set by whoever stops the server, so event streams end
    install_error_handlers(app)
    lambda_api.install_error_handler(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_payload_bytes)
    for module in (system, functions, versions, dead_letters, code, invocations, cluster, jobs,
                   logs, namespaces, lambda_api, lambda_versions, ui):
        app.include_router(module.router)
    app.include_router(namespaces.whoami_router)
    ui.install(app)
    return app


async def _step(what: str, work: Awaitable[object]) -> None:
    """One shutdown step, bounded: a gateway that never stops is worse than one that stops
    leaving a step unfinished. A step that overruns is logged with every task's stack (what
    it waits on), then cancelled, and shutdown goes on."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait([task], timeout=SHUTDOWN_STEP_S)
    if done:
        task.result()  # a step that failed fails shutdown, as it would unbounded
        return
    stacks = []
    for other in asyncio.all_tasks():
        out = io.StringIO()
        other.print_stack(limit=8, file=out)
        stacks.append(out.getvalue())
    log.error("shutdown: %s did not finish within %g s; going on. Tasks:\n%s", what,
              SHUTDOWN_STEP_S, "\n".join(stacks))
    task.cancel()
    await asyncio.wait([task], timeout=1.0)


async def _warn_if_open(redis: Redis) -> None:
    """Functions are confined to their job's keys only if they cannot log in as the default
    user: say so when a Redis lets anyone in without a password."""
    try:
        flags = (await redis.acl_getuser("default") or {}).get("flags", [])
    except RedisError:
        return  # not ours to inspect
    if "nopass" in flags and "off" not in flags:
        log.warning("the gateway's Redis lets anyone in without a password: functions could "
                    "use it to reach every job's and the platform's keys (give it one)")
