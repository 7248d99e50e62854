"""What functions wrote: one invocation's, a function's or a job's recent invocations', and
those as they finish (server-sent events). Records and logs are read from the record store
(``invoker/records.py``); what containers wrote outside invocations from the invoker.

Who sees what: an invocation belongs to the namespace its record names (``services.invocations.
visible``: a job's calls of ``default``'s built-in functions are the job's namespace's). Another
namespace's invocation, function or job is a 404, as one that never was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from faasrl.data.connection import UNREACHABLE
from faasrl.gateway.log_schemas import ContainerLogOut, InvocationLogOut, LogsOut
from faasrl.gateway.services import Services, jobs
from faasrl.gateway.services.invocations import visible
from faasrl.gateway.services.sse import Pace, redis_error
from faasrl.invoker.errors import FunctionNotFound
from faasrl.invoker.records import INDEX_LEN
from faasrl.job_manager import JobNotFound
from faasrl.namespaces import DEFAULT, Principal, local_name, namespace_of, qualify

FOLLOW_PAGE = 50  # the newest records a followed stream reads per function and poll


class NotVisible(LookupError):
    """No such invocation, function or job in the caller's namespace (a 404)."""


class LogsGone(LookupError):
    """The invocation's record is archived; its logs left Redis with it (a 404)."""


async def own_job(svc: Services, principal: Principal, job_id: str) -> None:
    """Raise ``NotVisible`` unless the job is the caller's (``services.jobs.owned``)."""
    try:
        await jobs.owned(svc, job_id, principal.namespace)
    except JobNotFound:
        raise NotVisible(f"no job {job_id!r}") from None


async def invocation(svc: Services, principal: Principal, invocation_id: str) -> str | None:
    """An invocation's logs ("" when it wrote nothing); None: no such invocation for the
    caller. Raises ``LogsGone`` for an archived record's."""
    record = await svc.records.get(invocation_id)
    if visible(record, principal.namespace) is None:
        return None
    text = (await svc.records.logs([invocation_id]))[0]
    if text is None and not await svc.records.logs_kept(invocation_id):
        raise LogsGone(f"the logs of invocation {invocation_id!r} are past their retention: "
                       "Redis keeps an invocation's logs with its record, and the archive "
                       "keeps records, not logs")
    return text or ""


def function_of(svc: Services, principal: Principal, name: str, job: str | None) -> str:
    """The platform's name of the caller's function ``name``; filtered by a job of the
    caller's, a built-in function of ``default`` (which every namespace's jobs run) too."""
    names = {spec.name for spec in svc.invoker.functions()}
    qualified = qualify(principal.namespace, name)
    if qualified in names:
        return qualified
    if job is not None and name in names and namespace_of(name) == DEFAULT:
        return name
    raise FunctionNotFound(f"no function named {name!r}")


async def function_logs(svc: Services, principal: Principal, function: str, job: str | None,
                        limit: int) -> LogsOut:
    """The ``limit`` most recent finished invocations of ``function`` (of ``job``'s alone
    when given) with their logs, and its containers' own output (none with ``job``)."""
    if job is not None:
        await own_job(svc, principal, job)
    records = await _records(svc, [function], job, limit)
    containers = [] if job is not None else [
        ContainerLogOut(at=out.at, container=out.container, logs=out.text)
        for out in svc.invoker.container_output(function)]
    return LogsOut(invocations=await _with_logs(svc, records, principal.namespace),
                   containers=containers)


async def job_logs(svc: Services, principal: Principal, job_id: str, limit: int) -> LogsOut:
    """The ``limit`` most recent finished invocations the job made, of every function."""
    await own_job(svc, principal, job_id)
    functions = [spec.name for spec in svc.invoker.functions()]
    records = await _records(svc, functions, job_id, limit)
    return LogsOut(invocations=await _with_logs(svc, records, principal.namespace),
                   containers=[])


async def _records(svc: Services, functions: list[str], job: str | None, limit: int
                   ) -> list[dict[str, Any]]:
    """Up to ``limit`` of the functions' most recent finished records, newest first; with
    ``job``, that job's among every record the functions' indexes keep (``INDEX_LEN``)."""
    found: list[dict[str, Any]] = []
    for function in functions:
        found += await (svc.records.recent(function, limit) if job is None else
                        svc.records.matching(function, lambda r: r.get("job") == job, limit))
    return sorted(found, key=lambda r: r["requested_at"], reverse=True)[:limit]


async def _with_logs(svc: Services, records: list[dict[str, Any]], namespace: str
                     ) -> list[InvocationLogOut]:
    records = [r for r in records if visible(r, namespace) is not None]
    logs = await svc.records.logs([r["id"] for r in records])
    return [InvocationLogOut(id=r["id"], function=local_name(r["function"]), job=r.get("job"),
                             status=r["status"], requested_at=r["requested_at"],
                             finished_at=r["finished_at"], logs=text or "")
            for r, text in zip(records, logs, strict=True)]


async def follow(svc: Services, principal: Principal, functions: list[str], job: str | None,
                 tail: int, *, closing: Callable[[], bool],
                 disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[str]:
    """Server-sent events: ``invocation`` (an ``InvocationLogOut``, ``id``: the invocation's)
    for the ``tail`` most recent finished invocations, oldest first, then for each one that
    finishes; for one function without ``job``, ``container`` (a ``ContainerLogOut``) for
    what its containers write outside invocations (those kept, with a ``tail``). ``error`` and
    the end if Redis is unreachable; ends when the gateway is ``closing`` or the client has
    ``disconnected``."""
    sent: dict[str, None] = {}  # ids sent or skipped, oldest first (the most recent INDEX_LEN)
    containers = job is None and len(functions) == 1
    since, first, pace = float("-inf") if tail else float("inf"), True, Pace(disconnected)
    while not closing():
        try:
            records = await _records(svc, functions, job,
                                     max(tail, FOLLOW_PAGE) if first else FOLLOW_PAGE)
            fresh = [r for r in reversed(records[:tail] if first else records)
                     if r["id"] not in sent]
            for out in await _with_logs(svc, fresh, principal.namespace):
                yield f"event: invocation\nid: {out.id}\ndata: {out.model_dump_json()}\n\n"
            sent.update((r["id"], None) for r in reversed(records))
            while len(sent) > INDEX_LEN:
                del sent[next(iter(sent))]
        except UNREACHABLE as exc:
            yield redis_error(exc)
            return
        written = svc.invoker.container_output(functions[0]) if containers else []
        if since == float("inf"):  # no tail: only what is written from now on
            since = max((o.at for o in written), default=0.0)
        written = [o for o in written if o.at > since]
        for o in written:
            data = ContainerLogOut(at=o.at, container=o.container, logs=o.text)
            yield f"event: container\ndata: {data.model_dump_json()}\n\n"
            since = o.at
        first = False
        if comment := pace.keep_alive(bool(fresh or written)):
            yield comment
        if not await pace.wait():
            return
