"""The invoker: carries out the pool's decisions on a backend and runs invocations.

The pool (``pool.py``) decides; this class does the I/O: it starts and stops containers through
the backend, waits for their runtimes, sends ``/init`` and ``/run``, retries an invocation once when
its container dies under it, kills containers whose runs outlive their deadline, and writes one
record per invocation. It knows nothing of RL.

Callers (the gateway, the job manager) see the node through the query methods below
(``functions``, ``spec``, ``shortfall``, ``containers``, ...), never through the pool or the
backend, so that what the pool keeps and how a backend is asked stays the invoker's business.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats, ZygoteState
from faasrl.backends.service import ServiceBackend
from faasrl.invoker.container_logs import ContainerLogs, ContainerOutput
from faasrl.invoker.errors import InvokerError, NotPlaceable, StartFailed
from faasrl.invoker.fairshare import Share
from faasrl.invoker.metrics import InvokerMetrics
from faasrl.invoker.pool import (
    Action,
    Assign,
    Container,
    Pool,
    Reject,
    Start,
    StartStem,
    State,
    Stop,
    StopStem,
    need_of,
)
from faasrl.invoker.quota import Usage
from faasrl.invoker.records import InvocationRecord, RecordStore, micro
from faasrl.invoker.runtime_client import RuntimeClient, RuntimeGone
from faasrl.invoker.tenant import Tenant
from faasrl.invoker.versions import is_version, versioned
from faasrl.manifest import FunctionSpec, NotOnLambda
from faasrl.namespaces import Quota
from faasrl.resources import Resources
from faasrl.runtime.logs import LOG_MAX

log = logging.getLogger(__name__)
# A stem cell's start limit, in start timeouts: it imports in the background at a low CPU
# weight, so under load its imports take minutes, and nobody waits for them.
STEM_START_TIMEOUTS = 5


@dataclass(frozen=True)
class InvokerConfig:
    """The invoker's timings; the settings' defaults (``FAASRL_START_TIMEOUT_S``, ...) are these."""

    start_timeout_s: float = 60.0
    stop_grace_s: float = 2.0
    timeout_grace_s: float = 1.0
    maintain_interval_s: float = 0.25
    container_logs_s: float = 900.0  # how long containers' output outside invocations is kept


def new_invocation_id() -> str:
    return uuid.uuid4().hex


def _seconds(value: Any) -> float | None:
    """A runtime's measured seconds, or None where it sent none (or nonsense)."""
    if isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value) and value >= 0:
        return micro(float(value))
    return None


@dataclass(frozen=True)
class ContainerInfo:
    """One container as the invoker's callers see it: a snapshot, which does not change as
    the container does.

    ``created_at`` and ``idle_since`` are ``time.monotonic()`` readings; ``handle`` is None
    until the backend has started the container."""

    id: str
    function: str
    state: State
    inflight: int
    served: int
    created_at: float
    idle_since: float | None
    gpus: tuple[int, ...]
    handle: ContainerHandle | None


def placement_of(spec: FunctionSpec, placement: str | None) -> str:
    """Where an invocation runs: ``placement`` where the caller names one, else the function's
    own (``local``: this node's containers; ``lambda``: a service backend)."""
    return placement or spec.placement


class Invoker:
    def __init__(self, backend: Backend, pool: Pool, *, records: RecordStore | None = None,
                 metrics: InvokerMetrics | None = None, config: InvokerConfig | None = None,
                 runtime_env: dict[str, str] | None = None,
                 services: Mapping[str, ServiceBackend] | None = None,
                 code: Callable[[str], Awaitable[bytes | None]] | None = None):
        """``code``: fetches an uploaded code archive by digest, for functions that have one."""
        self._backend = backend
        self._services = dict(services or {})  # placement name -> FaaS service backend
        self._pool = pool
        self.config = config or InvokerConfig()
        self._records = records
        self._metrics = metrics
        self._runtime_env = runtime_env or {}
        self._code = code
        self._waiters: dict[str, asyncio.Future[Assign]] = {}
        self._handles: dict[str, ContainerHandle] = {}
        self._stems: dict[str, ContainerHandle] = {}  # stem cell id -> its handle
        self._clients: dict[str, RuntimeClient] = {}
        self._start_s: dict[str, float] = {}
        self._starting: dict[str, asyncio.Task[Any]] = {}  # container id -> its start
        self._preempted: set[str] = set()  # starts the pool stopped (Stop while starting)
        self._logs = ContainerLogs(self.config.container_logs_s)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        reaped = self._backend.reap_orphans()
        if reaped:
            log.warning("reaped %d containers left behind by an earlier platform", reaped)
        self._ticker = asyncio.create_task(self._maintain(), name="invoker-maintain")

    async def close(self) -> None:
        """Stop every container; invocations still waiting fail."""
        if self._ticker is not None:
            self._ticker.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            client.close()
        await self._backend.close()
        for service in self._services.values():
            await service.close()
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(InvokerError("the platform is shutting down"))

    # ---------------------------------------------------------------- functions
    def register(self, spec: FunctionSpec) -> None:
        self._apply(self._pool.register(spec, time.monotonic()))

    def unregister(self, name: str) -> None:
        self._apply(self._pool.unregister(name, time.monotonic()))

    def prewarm(self, function: str, n: int, *, placement: str | None = None,
                tenant: Tenant | None = None) -> int:
        """Start containers until ``n`` exist for the function; returns how many were started.
        ``tenant``: who asks (a waiter of a higher weight may preempt what it starts).

        On a service backend (the function's or ``placement``), get ready for ``n`` concurrent
        invocations instead; nothing is started there."""
        service = self._service(self._pool.spec(function), placement)
        if service is not None:
            service.prewarm(self._pool.spec(function), n)
            return 0
        started, actions = self._pool.prewarm(function, n, time.monotonic(), tenant=tenant)
        self._apply(actions)
        return started

    # ------------------------------------------------------------------ queries
    @property
    def backend_name(self) -> str:
        """The backend local containers run on (``process``, ``docker``)."""
        return self._backend.name

    @property
    def capacity(self) -> Resources:
        """What this node hands out to containers."""
        return self._pool.capacity

    @property
    def reserved(self) -> Resources:
        """What the containers hold now."""
        return self._pool.reserved

    def functions(self) -> list[FunctionSpec]:
        """The registered functions, in the order they were first registered (their
        published versions, registered as deployables of their own, left out)."""
        return [s for s in self._pool.functions() if not is_version(s.name)]

    def spec(self, name: str) -> FunctionSpec:
        """A registered function's manifest; raises ``FunctionNotFound``."""
        return self._pool.spec(name)

    def shortfall(self, spec: FunctionSpec) -> dict[str, str]:
        """Per manifest field, why this node could not run ``spec`` (empty: it can): more than
        the whole node's capacity, or what the backend refuses (an image it lacks, ...)."""
        return {**self._pool.capacity.shortfall(need_of(spec)), **self._backend.check(spec)}

    def share(self, tenant: Tenant) -> Share:
        """``tenant``'s part of the node's recent usage against its fair share."""
        return self._pool.share(tenant, time.monotonic())

    def set_quota(self, namespace: str, quota: Quota) -> None:
        """Hold the namespace's tenants to ``quota`` from now on (what waits may fit now)."""
        self._apply(self._pool.set_quota(namespace, quota, time.monotonic()))

    def quota(self, namespace: str) -> Quota:
        """The quota the namespace is held to (no limits where none was set)."""
        return self._pool.quota(namespace)

    def usage(self, namespace: str) -> Usage:
        """What the namespace's tenants hold now: cores, memory_mb, gpus, containers (who a
        container counts for: ``invoker/quota.py``)."""
        return self._pool.usage(namespace)

    def queued(self, function: str) -> int:
        """Invocations of ``function`` waiting for a container."""
        return self._pool.queued(function)

    def containers(self) -> list[ContainerInfo]:
        """Every container of the node, oldest first."""
        return [ContainerInfo(c.id, c.function, c.state, c.inflight, c.served, c.created_at,
                              c.idle_since, c.gpus, self._handles.get(c.id))
                for c in sorted(self._pool.containers(), key=lambda c: c.created_at)]

    def stem_cells(self) -> dict[str, dict[str, int]]:
        """Stem cells per image ("": the backend's default) and state (starting, ready)."""
        return self._pool.stem_counts()

    def zygote_state(self) -> ZygoteState | None:
        """Whether the backend's zygote has done its imports (None: it has no zygotes)."""
        return self._backend.zygote_state()

    def zygote_not_preloaded(self) -> dict[str, str]:
        """The modules the backend's zygote could not import, and why."""
        return self._backend.zygote_not_preloaded()

    def container_output(self, function: str) -> list[ContainerOutput]:
        """What the function's containers wrote outside any invocation (imports, threads
        between runs), still kept, oldest first."""
        return self._logs.recent(function)

    def container_stats(self, container_id: str) -> ContainerStats | None:
        """A container's memory and CPU use; None once it is gone (or not started yet)."""
        handle = self._handles.get(container_id)
        return self._backend.stats(handle) if handle is not None else None

    # -------------------------------------------------------------- invocations
    async def invoke(self, function: str, args: Any = None, *, timeout_s: float | None = None,
                     invocation_id: str | None = None,
                     on_running: Callable[[InvocationRecord], None] | None = None,
                     affinity: str | None = None, placement: str | None = None,
                     client_context: dict[str, Any] | None = None,
                     tenant: Tenant | None = None, version: int | None = None,
                     cores: float = 0.0) -> InvocationRecord:
        """Run one invocation to its end and return its record.

        ``affinity``: prefer the warm container that last ran an invocation with this key.
        ``placement``: ``local`` or a service backend's name (``lambda``); default: the
        function's own placement. ``client_context``: Lambda's ClientContext (``client``,
        ``custom``, ``env``), handed to a local handler as ``context.client_context``.
        ``tenant``: who it is for (default: its function's own, ``Tenant.of_function``).
        ``version``: a published version of the function to run (``invoker/versions.py``);
        None: its $LATEST. ``cores``: the cores it may use in all where the node has them free
        (lent cores, up to the manifest's ``cpu_max``); 0: its ``cpu``.

        Raises ``InvokerError`` when the invocation is refused (unknown function, queue full,
        no container in time); everything that happens once it runs is in the record.
        """
        deployable = function if version is None else versioned(function, version)
        spec = self._pool.spec(deployable)
        timeout = spec.timeout_s if timeout_s is None else min(timeout_s, spec.timeout_s)
        tenant = tenant or Tenant.of_function(function)
        rec = InvocationRecord(invocation_id or new_invocation_id(), function,
                               memory_mb=spec.memory_mb, backend=self._backend.name,
                               requested_at=time.time(), namespace=tenant.namespace,
                               job=tenant.job)
        if version is not None:
            rec.version = version
        if (service := self._service(spec, placement)) is not None:
            return await self._invoke_on(service, spec, args, timeout, rec, on_running)
        logs = ""
        try:
            for attempt in (1, 2):
                rec.attempts = attempt
                try:
                    assign, waited = await self._acquire(
                        deployable, f"{rec.id}/{attempt}", retry=attempt > 1, affinity=affinity,
                        tenant=tenant, cores=cores if self._backend.lends_cores else 0.0)
                except StartFailed as exc:
                    rec.status, rec.error = "error", {"type": exc.kind, "message": exc.message}
                    break
                except InvokerError as exc:
                    rec.status = "error"
                    if attempt == 1:
                        rec.error = {"type": exc.kind, "message": exc.message}
                        raise
                    rec.error = {"type": "ContainerDied",
                                 "message": f"container died; the retry failed: {exc.message}"}
                    break
                rec.queue_s = micro(rec.queue_s + waited)
                rec.container = assign.container
                rec.cores = assign.cores or None
                handle = self._handles.get(assign.container)
                rec.node = handle.node if handle is not None else None
                if assign.cold:
                    rec.cold = True
                    rec.init_s += self._start_s.get(assign.container, 0.0)
                    rec.stem_cell = handle is not None and handle.stem_cell
                rec.status = "running"
                if on_running is not None:
                    on_running(rec)
                init_billed = self._start_s.get(assign.container, 0.0) if assign.bills_init else 0
                done, logs = await self._run(assign.container, args, timeout, rec,
                                             init_billed, client_context, assign.cores)
                if done:
                    break
        finally:
            rec.finished_at = time.time()
            if rec.status not in ("success", "error", "timeout"):
                rec.status = "error"
                rec.error = rec.error or {"type": "Cancelled", "message": "invocation cancelled"}
            if self._records is not None:
                self._records.put(rec, logs)
            if self._metrics is not None:
                self._metrics.observe(rec)
        return rec

    def _service(self, spec: FunctionSpec, placement: str | None) -> ServiceBackend | None:
        """The service backend an invocation goes to, None for a local container."""
        where = placement_of(spec, placement)
        if where == "local":
            return None
        if where not in self._services:
            raise NotPlaceable(f"{spec.name!r} cannot run on {where!r}: this platform has no "
                               f"such backend (it has: local, {', '.join(self._services)})")
        if where == "lambda":
            try:
                spec.lambda_target()
            except NotOnLambda as exc:
                raise NotPlaceable(str(exc)) from None
        return self._services[where]

    async def _invoke_on(self, service: ServiceBackend, spec: FunctionSpec, args: Any,
                         timeout: float, rec: InvocationRecord,
                         on_running: Callable[[InvocationRecord], None] | None
                         ) -> InvocationRecord:
        """One invocation run by a service backend; the record is written as for any other."""
        rec.backend, rec.status, rec.attempts = service.name, "running", 1
        logs = ""
        if on_running is not None:
            on_running(rec)
        try:
            out = await service.invoke(spec, args, timeout)
            rec.status, rec.result, rec.error = out.status, out.result, out.error
            rec.attempts, rec.cold = out.attempts, out.cold
            rec.queue_s, rec.init_s, rec.run_s = out.queue_s, out.init_s, out.run_s
            rec.billed_ms, rec.memory_mb = out.billed_ms, out.memory_mb or rec.memory_mb
            logs = out.logs
        except Exception as exc:  # a fault of the service backend, kept in the record
            log.exception("%s backend failed on %s", service.name, rec.id)
            rec.status, rec.error = "error", {"type": type(exc).__name__, "message": str(exc)}
        finally:
            rec.finished_at = time.time()
            if rec.status not in ("success", "error", "timeout"):
                rec.status = "error"
                rec.error = {"type": "Cancelled", "message": "invocation cancelled"}
            if self._records is not None:
                self._records.put(rec, logs)
            if self._metrics is not None:
                self._metrics.observe(rec)
        return rec

    async def _acquire(self, function: str, waiter: str, *, retry: bool,
                       affinity: str | None, tenant: Tenant, cores: float = 0.0
                       ) -> tuple[Assign, float]:
        fut: asyncio.Future[Assign] = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = fut
        t0 = time.monotonic()
        try:
            self._apply(self._pool.request(function, waiter, t0, retry=retry,
                                          affinity=affinity, tenant=tenant, cores=cores))
            assign = await fut
        except asyncio.CancelledError:
            self._waiters.pop(waiter, None)
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._apply(self._pool.release(fut.result().container, time.monotonic()))
            else:
                self._apply(self._pool.cancel(waiter, time.monotonic()))
            raise
        finally:
            self._waiters.pop(waiter, None)
        return assign, time.monotonic() - t0

    async def _run(self, cid: str, args: Any, timeout: float, rec: InvocationRecord,
                   init_billed: float, client_context: dict[str, Any] | None = None,
                   cores: float = 0.0) -> tuple[bool, str]:
        """One attempt; whether it is over (False: the container died and the invocation may
        retry), and what the handler wrote. ``cores``: the run's (0: the container's own)."""
        body = {"args": args, "deadline_s": timeout, "invocation_id": rec.id}
        if cores:  # the runtime sizes its thread pools to them
            body["threads"] = max(1, int(cores))
        if client_context is not None:
            body["client_context"] = client_context
        t0 = time.monotonic()
        try:
            status, out = await self._clients[cid].request(
                "POST", "/run", body, timeout=timeout + self.config.timeout_grace_s)
        except TimeoutError:
            rec.run_s = micro(time.monotonic() - t0)
            rec.bill(rec.run_s, init_billed)
            self._lose(cid, "run outlived its deadline")
            rec.status = "timeout"
            rec.error = {"type": "Timeout",
                         "message": f"no answer within the deadline of {timeout:g} s"}
            return True, ""
        except RuntimeGone:
            rec.bill(time.monotonic() - t0, init_billed)
            self._lose(cid, "died mid-invocation")
            if rec.attempts > 1:
                rec.status = "error"
                rec.error = {"type": "ContainerDied",
                             "message": "the container died mid-invocation, twice"}
                return True, ""
            return False, ""
        except BaseException:
            self._lose(cid, "invocation cancelled mid-run")
            raise
        logs = out.get("logs")  # bounded here too: the handler shares the runtime's process
        logs = logs[-LOG_MAX:] if isinstance(logs, str) else ""
        if isinstance(written := out.get("container_logs"), str):
            self._logs.add(rec.function, cid, written)
        rec.run_s = micro(float(out.get("duration_s", time.monotonic() - t0)))
        rec.cpu_s, rec.wait_s = _seconds(out.get("cpu_s")), _seconds(out.get("wait_s"))
        rec.bill(rec.run_s, init_billed)
        error = out.get("error")
        if status != 200:
            rec.status, rec.error = "error", error or {"type": "RuntimeError",
                                                      "message": f"runtime answered {status}"}
            self._release(cid)
        elif error is None:
            rec.status, rec.result = "success", out.get("result")
            self._release(cid)
        elif error.get("type") == "Timeout":
            rec.status, rec.error = "timeout", error
            self._lose(cid, "run outlived its deadline")  # the runtime exits by itself
        else:
            rec.status, rec.error = "error", error
            self._release(cid)
        return True, logs

    def _release(self, cid: str) -> None:
        self._apply(self._pool.release(cid, time.monotonic()))

    def _lose(self, cid: str, reason: str) -> None:
        self._apply(self._pool.lost(cid, reason, time.monotonic()))

    # ------------------------------------------------------------------ actions
    def _apply(self, actions: Iterable[Action]) -> None:
        for action in actions:
            match action:
                case Assign(waiter=waiter):
                    fut = self._waiters.get(waiter)
                    if fut is not None and not fut.done():
                        fut.set_result(action)
                    else:  # nobody waits any more: give the container back
                        self._release(action.container)
                case Reject(waiter=waiter, error=error):
                    fut = self._waiters.get(waiter)
                    if fut is not None and not fut.done():
                        fut.set_exception(error)
                case Start(container=cid):
                    self._starting[cid] = self._spawn(self._start_container(action),
                                                      f"start-{cid}")
                case Stop(container=cid, reason=reason) if cid in self._starting:
                    # Preempted while it starts: cut the start short where that is safe, once
                    # the backend has its handle (else it is done as the handle comes).
                    log.debug("cancelling the start of %s: %s", cid, reason)
                    self._preempted.add(cid)
                    if cid in self._handles:
                        self._starting[cid].cancel()
                case Stop(container=cid, reason=reason):
                    self._spawn(self._stop_container(cid, reason), f"stop-{cid}")
                case StartStem():
                    self._spawn(self._start_stem(action), f"start-stem-{action.stem}")
                case StopStem(stem=sid, reason=reason):
                    self._spawn(self._stop_stem(sid, reason), f"stop-stem-{sid}")

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _start_container(self, action: Start) -> None:
        cid, spec = action.container, action.spec
        t0 = time.monotonic()
        handle: ContainerHandle | None = None
        try:
            async with asyncio.timeout(self.config.start_timeout_s):
                stem = self._stems.pop(action.stem, None) if action.stem else None
                handle = await self._backend.start(spec, cid, action.gpus, stem)
                self._handles[cid] = handle
                if cid in self._preempted:
                    raise asyncio.CancelledError
                client = self._clients[cid] = RuntimeClient(handle.host, handle.port,
                                                             handle.secret)
                init = {
                    "handler": spec.handler, "function": spec.name, "memory_mb": spec.memory_mb,
                    "concurrency": spec.max_concurrency,
                    # A manifest may point its function at another data plane address (a Redis
                    # reached over a WAN link, a replica); the name is the platform's.
                    "env": {**handle.init.get("env", {}), **self._runtime_env, **spec.env,
                            "FAASRL_FUNCTION": spec.name},
                }
                if "cwd" in handle.init:  # a stem cell's: where the function's code is
                    init["cwd"] = handle.init["cwd"]
                if spec.code_sha256:
                    init["code"] = await self._archive(spec.code_sha256)
                await self._wait_ready(client, handle)
                status, out = await client.request("POST", "/init", init)
            if status != 200:
                err = (out or {}).get("error", {})
                raise StartFailed(err.get("message", f"/init answered {status}"),
                                  err.get("type", "InitError"))
            if isinstance(written := (out or {}).get("container_logs"), str):  # imports' output
                self._logs.add(spec.name, cid, written)
        except asyncio.CancelledError:
            self._starting.pop(cid, None)
            await self._discard(cid, handle)
            if cid in self._preempted:  # it is gone: the pool may hand out what it held
                self._preempted.discard(cid)
                self._apply(self._pool.stopped(cid, time.monotonic()))
                return
            raise
        except Exception as exc:
            if not isinstance(exc, StartFailed):
                detail = "took too long" if isinstance(exc, TimeoutError) else f"{exc}"
                tail = self._backend.logs(handle, tail=5).strip() if handle else ""
                exc = StartFailed(f"container for {spec.name!r} failed to start: {detail}"
                                  + (f"\n{tail}" if tail else ""))
            log.warning("%s", exc.message)
            self._starting.pop(cid, None)
            self._preempted.discard(cid)
            await self._discard(cid, handle)
            self._apply(self._pool.start_failed(cid, exc, time.monotonic()))
            return
        self._start_s[cid] = micro(time.monotonic() - t0)
        if self._metrics is not None:
            self._metrics.observe_start(spec.name, self._start_s[cid])
        self._starting.pop(cid, None)  # before ready(): what it answers may stop it
        self._apply(self._pool.ready(cid, time.monotonic()))

    async def _archive(self, sha256: str) -> str:
        data = await self._code(sha256) if self._code is not None else None
        if data is None:
            raise StartFailed(f"the code archive {sha256} is gone", "InitError")
        return base64.b64encode(data).decode()

    async def _wait_ready(self, client: RuntimeClient, handle: ContainerHandle) -> Any:
        """The runtime's first answer to ``/healthz``."""
        delay = 0.005
        while True:
            code = self._backend.exit_code(handle)
            if code is not None:
                raise StartFailed(f"the container exited with status {code} while starting:\n"
                                  + self._backend.logs(handle, tail=10).strip())
            try:
                status, health = await client.request("GET", "/healthz")
                if status == 200:
                    return health
            except RuntimeGone:
                pass
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def _discard(self, cid: str, handle: ContainerHandle | None) -> None:
        client = self._clients.pop(cid, None)
        if client is not None:
            client.close()
        self._handles.pop(cid, None)
        if handle is not None:
            await self._backend.stop(handle, 0.0)

    async def _stop_container(self, cid: str, reason: str) -> None:
        log.debug("stopping %s: %s", cid, reason)
        handle = self._handles.pop(cid, None)
        client = self._clients.pop(cid, None)
        if client is not None:
            client.close()
        try:
            if handle is not None:
                await self._backend.stop(handle, self.config.stop_grace_s)
        finally:
            self._start_s.pop(cid, None)
            self._apply(self._pool.stopped(cid, time.monotonic()))

    # --------------------------------------------------------------- stem cells
    async def _start_stem(self, action: StartStem) -> None:
        """Start a stem cell and tell the pool when its runtime has done its imports."""
        sid = action.stem
        handle: ContainerHandle | None = None
        limit_s = STEM_START_TIMEOUTS * self.config.start_timeout_s
        try:
            async with asyncio.timeout(limit_s):
                handle = await self._backend.start_stem(action.image, sid, action.memory_mb)
                self._stems[sid] = handle
                client = RuntimeClient(handle.host, handle.port, handle.secret)
                try:
                    health = await self._wait_ready(client, handle)
                finally:
                    client.close()
            health = health if isinstance(health, dict) else {}
            memory = health.get("memory_mb")
            if health.get("stem_cell") is not True or not isinstance(memory, int | float):
                raise StartFailed("its runtime is no stem cell (an image with an older faasrl?)")
        except asyncio.CancelledError:
            await self._discard_stem(sid, handle)
            raise
        except Exception as exc:
            detail = (exc.message if isinstance(exc, StartFailed) else
                      f"not ready in {limit_s:g} s" if isinstance(exc, TimeoutError) else exc)
            log.warning("stem cell of %s failed to start: %s",
                        action.image or "the default image", detail)
            await self._discard_stem(sid, handle)
            self._apply(self._pool.stem_failed(sid, time.monotonic()))
            return
        self._apply(self._pool.stem_ready(sid, float(memory), time.monotonic()))

    async def _discard_stem(self, sid: str, handle: ContainerHandle | None) -> None:
        self._stems.pop(sid, None)
        if handle is not None:
            await self._backend.stop(handle, 0.0)

    async def _stop_stem(self, sid: str, reason: str) -> None:
        log.debug("stopping stem cell %s: %s", sid, reason)
        try:
            await self._discard_stem(sid, self._stems.get(sid))
        finally:
            self._apply(self._pool.stem_stopped(sid, time.monotonic()))

    # -------------------------------------------------------------- maintenance
    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(self.config.maintain_interval_s)
            try:
                now = time.monotonic()
                self._follow_capacity(now)
                for c in self._pool.containers():
                    self._check_exit(c, now)
                for stem in self._pool.stems():
                    handle = self._stems.get(stem.id)
                    if stem.state is State.IDLE and handle is not None \
                            and (code := self._backend.exit_code(handle)) is not None:
                        self._apply(self._pool.stem_lost(stem.id, f"exited with status {code}"))
                self._apply(self._pool.tick(now))
            except Exception:
                log.exception("invoker maintenance failed")

    def _follow_capacity(self, now: float) -> None:
        """Take the backend's capacity when it has its own (a cluster's nodes come and go)."""
        capacity = self._backend.capacity()
        if capacity is not None and capacity != self._pool.capacity:
            log.info("capacity now %s (was %s)", capacity, self._pool.capacity)
            self._apply(self._pool.resize(capacity, range(int(capacity.gpus)), now))

    def _check_exit(self, c: Container, now: float) -> None:
        if c.state not in (State.IDLE, State.BUSY):
            return
        handle = self._handles.get(c.id)
        if handle is not None and (code := self._backend.exit_code(handle)) is not None:
            self._apply(self._pool.lost(c.id, f"exited with status {code}", now))
