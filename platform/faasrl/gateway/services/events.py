"""Runs asynchronous invocations to their end (``gateway/async_events.py`` says what that
means): each is a gateway task that waits for its attempt's time, runs it, then ends the event
(destination, dead letter) or plans its retry. A task cancelled at shutdown leaves its event
in Redis, where ``resume`` finds it at the next start."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from redis.exceptions import RedisError

from faasrl.gateway.async_events import (
    CHAIN_MAX,
    Condition,
    DeadLetter,
    Event,
    GiveUp,
    after_failure,
    destination_record,
    too_old,
)
from faasrl.gateway.lambda_schemas import function_arn
from faasrl.gateway.services import Services
from faasrl.invoker.errors import FunctionNotFound, InvokerError
from faasrl.invoker.invoker import new_invocation_id
from faasrl.invoker.records import FINAL, InvocationRecord
from faasrl.manifest import FunctionSpec
from faasrl.namespaces import local_name, namespace_of, qualify

log = logging.getLogger(__name__)


async def submit(svc: Services, spec: FunctionSpec, args: Any, *,
                 invocation_id: str | None = None, chain: int = 1, **options: Any) -> str:
    """Accept an event and start it; its id. Its record says ``queued`` and the event is in
    Redis before this returns. ``chain``: its place in a chain of destinations.
    ``options``: ``Invoker.invoke``'s keywords."""
    now = time.time()
    event = Event(invocation_id or new_invocation_id(), spec.name, args, now, [], now,
                  {k: v for k, v in options.items() if v is not None}, chain)
    event.attempts.append(event.id)
    rec = InvocationRecord(event.id, spec.name, memory_mb=spec.memory_mb,
                           backend=svc.invoker.backend_name, requested_at=now,
                           namespace=namespace_of(spec.name), version=options.get("version"))
    await svc.records.put_now(rec)
    try:
        await svc.events.save(event)
    except RedisError as exc:  # refused (a 503): its record must not stay queued
        rec.status, rec.finished_at = "error", time.time()
        rec.error = {"type": "RedisUnavailable", "message": f"not accepted: {exc}"}
        svc.records.put(rec)
        raise
    svc.spawn(_guarded(run(svc, event), event))
    return event.id


async def resume(svc: Services) -> int:
    """Start again the events an earlier gateway left unfinished; how many there were."""
    events = await svc.events.all()
    for event in events:
        svc.spawn(_guarded(_resume(svc, event), event))
    if events:
        log.warning("resuming %d asynchronous invocations an earlier gateway left unfinished",
                    len(events))
    return len(events)


async def run(svc: Services, event: Event) -> None:
    """Drive ``event`` to its end: wait for its attempt's time, run it, settle, again."""
    while True:
        await asyncio.sleep(max(0.0, event.due_at - time.time()))
        try:
            spec = svc.invoker.spec(event.function)
        except FunctionNotFound:
            spec = None
        if spec is not None and (old := too_old(spec, event, time.time())) is not None:
            await _give_up(svc, spec, event, None, old)
            return
        if await _settle(svc, event, await _attempt(svc, event)):
            return


async def _resume(svc: Services, event: Event) -> None:
    found = await svc.records.get(event.attempts[-1])
    if found is not None and found["retried_by"] and found["retried_by"] not in event.attempts:
        # stopped between planning a retry and saving the event: the planned one runs
        event.attempts.append(found["retried_by"])
        event.due_at = time.time() + svc.settings.async_retry_base_s
        found = None
    if found is not None and found["status"] != "queued":  # it ran before the gateway stopped
        rec = InvocationRecord(**found)
        if rec.status not in FINAL:  # the gateway died while it ran: no answer will come
            rec.status, rec.finished_at = "error", time.time()
            rec.error = {"type": "GatewayStopped", "message": "the gateway stopped while this "
                                                              "attempt ran"}
            svc.records.put(rec)
        if await _settle(svc, event, rec):
            return
    await run(svc, event)


async def _guarded(work: Any, event: Event) -> None:
    """An event's task: a Redis outage ends it, logged; the event stays in Redis as it was
    last saved and resumes at the next start."""
    try:
        await work
    except RedisError as exc:
        log.error("asynchronous invocation %s of %s: Redis failed (%s); it resumes when the "
                  "gateway starts again", event.id, event.function, exc)


async def _attempt(svc: Services, event: Event) -> InvocationRecord:
    """Run the event's last attempt; its record (a refusal too: a failed attempt)."""
    iid = event.attempts[-1]
    retry_of = event.id if iid != event.id else None

    def running(rec: InvocationRecord) -> None:
        rec.retry_of = retry_of  # the invoker's record object: kept to its end
        svc.records.put(rec)

    try:
        return await svc.invoker.invoke(event.function, event.args, invocation_id=iid,
                                        on_running=running, **event.options)
    except InvokerError as exc:  # refused (deleted, queue full, no container in time)
        found = await svc.records.get(iid)
        now = time.time()
        rec = (InvocationRecord(**found) if found is not None and found["status"] in FINAL
               else InvocationRecord(iid, event.function, status="error", requested_at=now,
                                     finished_at=now, namespace=namespace_of(event.function)))
        rec.error, rec.retry_of = {"type": exc.kind, "message": exc.message}, retry_of
        svc.records.put(rec)
        return rec


async def _settle(svc: Services, event: Event, rec: InvocationRecord) -> bool:
    """After an attempt: end the event (its destination, or the dead-letter list) or plan
    its retry. Whether it ended."""
    try:
        spec = svc.invoker.spec(event.function)
    except FunctionNotFound:  # deleted since: its dead letters went with it
        await svc.events.delete(event.id)
        return True
    if rec.status == "success":
        await _send(svc, spec, spec.on_success, event, "Success", len(event.attempts), rec)
        await svc.events.delete(event.id)
        return True
    step = after_failure(spec, event, time.time(), svc.settings.async_retry_base_s)
    if isinstance(step, GiveUp):
        await _give_up(svc, spec, event, rec, step)
        return True
    following = new_invocation_id()
    rec.retried_by = following
    svc.records.put(rec)
    svc.records.put(InvocationRecord(following, event.function, memory_mb=spec.memory_mb,
                                     backend=svc.invoker.backend_name,
                                     requested_at=time.time(), retry_of=event.id,
                                     namespace=namespace_of(event.function)))
    event.attempts.append(following)
    event.due_at = step.at
    await svc.events.save(event)
    return False


async def _give_up(svc: Services, spec: FunctionSpec, event: Event,
                   rec: InvocationRecord | None, step: GiveUp) -> None:
    """Dead-letter the event. ``rec``: its last attempt, None where that never ran (its
    record then says why)."""
    why = {"type": step.condition, "message": step.reason}
    ran = len(event.attempts) - (rec is None)
    if rec is None:
        now = time.time()
        retry_of = event.id if event.attempts[-1] != event.id else None
        svc.records.put(InvocationRecord(event.attempts[-1], event.function, status="error",
                                         backend=svc.invoker.backend_name, requested_at=now,
                                         finished_at=now, error=why, retry_of=retry_of,
                                         namespace=namespace_of(event.function)))
    await svc.dead_letters.add(DeadLetter(
        id=event.id, function=event.function, args=event.args,
        error=(rec.error or {"type": rec.status}) if rec is not None else why,
        condition=step.condition, reason=step.reason, attempts=ran,
        invocation_ids=event.attempts, requested_at=event.requested_at,
        failed_at=time.time()))
    log.warning("asynchronous invocation %s of %s dead-lettered: %s", event.id, event.function,
                step.reason)
    await _send(svc, spec, spec.on_failure, event, step.condition, ran, rec)
    await svc.events.delete(event.id)


async def _send(svc: Services, spec: FunctionSpec, destination: str | None, event: Event,
                condition: Condition, attempts: int, rec: InvocationRecord | None) -> None:
    """Invoke ``destination`` (a function of the event's namespace) asynchronously with
    Lambda's destination record; one that is gone or refuses is logged, not retried. A chain
    of destinations stops at ``CHAIN_MAX`` invocations: two functions that name each other
    would otherwise invoke each other for ever."""
    if destination is None:
        return
    if event.chain >= CHAIN_MAX:
        log.warning("asynchronous invocation %s of %s: its destination %r not invoked: the "
                    "chain of destinations reached %d invocations (a loop?)", event.id,
                    event.function, destination, CHAIN_MAX)
        return
    name = qualify(namespace_of(event.function), destination)
    arn = function_arn(svc.settings.lambda_api_region, local_name(event.function))
    try:
        target = svc.invoker.spec(name)
        await submit(svc, target, destination_record(event, arn, condition, attempts, rec,
                                                     spec.timeout_s), chain=event.chain + 1)
    except InvokerError as exc:
        log.warning("asynchronous invocation %s of %s: its destination %r refused it: %s",
                    event.id, event.function, destination, exc.message)
