"""Invocations the gateway runs for a client that does not wait, and the records it reads."""

from __future__ import annotations

from typing import Any

from faasrl.gateway.errors import HandlerRefusedArgs
from faasrl.gateway.memory import MB
from faasrl.gateway.schemas import ArchiveOut, InvokeRequest, RecordsOut
from faasrl.gateway.services import Services, events
from faasrl.gateway.services.versions import resolve
from faasrl.manifest import FunctionSpec
from faasrl.namespaces import local_name, owns
from faasrl.runtime.invalid import INVALID_ARGS


async def run(svc: Services, name: str, request: InvokeRequest,
              qualifier: str | None = None) -> bytes:
    """Run an invocation while the client waits; its record as the JSON answered, or
    ``HandlerRefusedArgs`` (a 400) when the handler refused an argument. ``qualifier``:
    $LATEST (None), a published version or an alias."""
    rec = await svc.invoker.invoke(
        name, request.args, timeout_s=request.timeout_s, affinity=request.affinity,
        version=None if qualifier is None else resolve(svc, name, qualifier))
    if rec.status == "error" and rec.error and rec.error.get("type") == INVALID_ARGS \
            and "field" in rec.error:
        raise HandlerRefusedArgs(rec.id, rec.error)
    return rec.to_json()


async def accept(svc: Services, spec: FunctionSpec, args: Any, *,
                 invocation_id: str | None = None, timeout_s: float | None = None,
                 affinity: str | None = None, placement: str | None = None,
                 client_context: dict[str, Any] | None = None,
                 version: int | None = None) -> str:
    """Queue an invocation and return its id: its record says ``queued`` before this returns
    (so a poll right after finds it), and it runs as a gateway task, retried on failure
    (``gateway/async_events.py``). The keywords are ``Invoker.invoke``'s. Refused while
    memory is short (``MemoryWatch``): an async invocation can wait."""
    svc.memory.admit("a new async invocation")
    return await events.submit(svc, spec, args, invocation_id=invocation_id,
                               timeout_s=timeout_s, affinity=affinity, placement=placement,
                               client_context=client_context, version=version)


def shown(rec: dict[str, Any]) -> dict[str, Any]:
    """A record as the API answers it: under its function's bare name."""
    rec["function"] = local_name(rec["function"])
    return rec


def visible(rec: dict[str, Any] | None, namespace: str) -> dict[str, Any] | None:
    """The record if it is ``namespace``'s (made in it, or by one of its jobs), else None:
    another namespace's record is answered as one that never was."""
    return rec if rec is not None and rec["namespace"] == namespace else None


async def recent(svc: Services, namespace: str, function: str | None, limit: int,
                 status: str | None = None) -> list[dict[str, Any]]:
    """The ``limit`` most recent finished invocations of ``namespace``, of one function
    (qualified) or of all its functions, newest first, read on into the archive; with
    ``status``, only those that ended so, among every record the functions' indexes keep
    (``INDEX_LEN`` each). Invocations a namespace's jobs made of ``default``'s built-in
    functions are found by id, not listed here."""
    names = [function] if function else [f.name for f in svc.invoker.functions()
                                         if owns(namespace, f.name)]
    def ended(record: dict[str, Any]) -> bool:
        return record["status"] == status

    records = [r for name in names for r in (
        await svc.records.recent(name, limit, from_archive=True) if status is None
        else await svc.records.matching(name, ended, limit)) if r["namespace"] == namespace]
    return sorted(records, key=lambda r: r["requested_at"], reverse=True)[:limit]


def retention(svc: Services) -> RecordsOut:
    """What the records take of Redis, what bounds them, and what the archive keeps."""
    store, usage, settings = svc.records, svc.records.usage, svc.settings
    return RecordsOut(
        in_redis=usage.count, redis_mb=round(usage.bytes / MB, 2),
        redis_max_mb=settings.record_max_mb, ttl_s=settings.record_ttl_s,
        archived=usage.archived, discarded=usage.discarded,
        archive=None if store.archive is None else ArchiveOut(
            max_mb=settings.record_archive_mb, days=settings.record_archive_days,
            oldest_hour_utc=store.archive.oldest(), writing=store.archiving))


def not_found(svc: Services, invocation_id: str) -> str:
    """Why there is no record of ``invocation_id``: it never was, or it has passed its
    retention (which the answer spells out)."""
    s = svc.settings
    kept = (f"Redis keeps records for {s.record_ttl_s} s within {s.record_max_mb:g} MB, the "
            "oldest leaving first")
    archive = svc.records.archive
    if archive is None:
        kept += " (no archive)"
    else:
        oldest = archive.oldest()
        kept += (f", then the archive keeps them for {s.record_archive_days:g} days within "
                 f"{s.record_archive_mb:g} MB (its oldest records left Redis in the hour "
                 f"{oldest or 'none yet'} UTC)")
    return f"no invocation {invocation_id!r}: never made, or past its retention ({kept})"
