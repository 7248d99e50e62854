"""Asynchronous invocations as events: retried with back-off, dead-lettered, sent on.

An asynchronous invocation (``mode=async``, the Lambda API's ``Event``) is an *event* with
Lambda's semantics: a failed attempt (error, timeout, or refused: queue full, no container in
time) is retried after a back-off that doubles (``Settings.async_retry_base_s``, then twice that),
at most the function's ``maximum_retry_attempts`` times and never past its
``maximum_event_age_s``; what still fails lands in the function's dead-letter list. The
function's ``on_success`` / ``on_failure`` destination then gets Lambda's destination record.

Every attempt has its own invocation record: the first runs under the id the caller was given,
each retry under a new id whose record says ``retry_of`` (the first id), and a failed attempt
that is retried says ``retried_by`` (the next). An event is kept in Redis (``ASYNC_EVENTS``) from
its acceptance until it ends, so a gateway that stops — or dies — resumes it at its next start.

This module holds what is decided (pure) and the two Redis stores; the service that runs events
is ``gateway/services/events.py``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from faasrl.data.keys import ASYNC_EVENTS, dead_letter_order_key, dead_letters_key
from faasrl.gateway.lambda_schemas import EXECUTED_VERSION, function_error
from faasrl.invoker.records import InvocationRecord
from faasrl.manifest import FunctionSpec

DEAD_LETTERS_MAX = 1000  # dead letters kept per function; the oldest go first
CHAIN_MAX = 16  # invocations in one chain of destinations (Lambda stops a recursive loop at 16)
Condition = Literal["Success", "RetriesExhausted", "EventAgeExceeded"]  # Lambda's names


@dataclass
class Event:
    """One asynchronous invocation until it ends, as Redis keeps it (JSON)."""

    id: str  # the id the caller was given: its first attempt's invocation id
    function: str  # qualified
    args: Any
    requested_at: float  # epoch seconds; its age counts from here
    attempts: list[str]  # invocation ids, oldest first: the last one is running or next
    due_at: float  # when the last attempt is to start
    options: dict[str, Any] = field(default_factory=dict)  # Invoker.invoke's keywords
    chain: int = 1  # its place in a chain of destinations: 1 for an invocation a client made

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> Event:
        return cls(**json.loads(raw))


@dataclass(frozen=True)
class Retry:
    at: float  # epoch seconds


@dataclass(frozen=True)
class GiveUp:
    condition: Condition
    reason: str


def after_failure(spec: FunctionSpec, event: Event, now: float, base_s: float
                  ) -> Retry | GiveUp:
    """What follows a failed attempt (the event's last): a retry after the back-off, or the
    dead-letter list — already now when the retry would be due past the event's maximum age."""
    made = len(event.attempts)
    if made > spec.maximum_retry_attempts:
        return GiveUp("RetriesExhausted", f"failed {made} attempt(s) (maximum_retry_attempts "
                                          f"{spec.maximum_retry_attempts})")
    at = now + base_s * 2 ** (made - 1)
    if at - event.requested_at > spec.maximum_event_age_s:
        return GiveUp("EventAgeExceeded", f"its retry would be due {at - event.requested_at:.0f}"
                                          f" s after it was accepted, past maximum_event_age_s "
                                          f"{spec.maximum_event_age_s}")
    return Retry(at)


def too_old(spec: FunctionSpec, event: Event, now: float) -> GiveUp | None:
    """An event found past its maximum age before an attempt (the gateway was down)."""
    age = now - event.requested_at
    if age <= spec.maximum_event_age_s:
        return None
    return GiveUp("EventAgeExceeded", f"{age:.0f} s old, past maximum_event_age_s "
                                      f"{spec.maximum_event_age_s}, before its next attempt")


def destination_record(event: Event, arn: str, condition: Condition, attempts: int,
                       rec: InvocationRecord | None, timeout_s: float) -> dict[str, Any]:
    """Lambda's destination record: what an ``on_success`` / ``on_failure`` function gets."""
    response: dict[str, Any] = {"statusCode": 200, "executedVersion": EXECUTED_VERSION}
    if rec is not None and rec.status == "success":
        payload: Any = rec.result
    else:
        response["functionError"] = "Unhandled"
        payload = (function_error(rec, timeout_s).model_dump() if rec is not None else
                   {"errorType": condition, "errorMessage": "no attempt ran", "stackTrace": []})
    return {
        "version": "1.0",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "requestContext": {"requestId": event.id, "functionArn": f"{arn}:{EXECUTED_VERSION}",
                           "condition": condition, "approximateInvokeCount": attempts},
        "requestPayload": event.args,
        "responseContext": response,
        "responsePayload": payload,
    }


class EventStore:
    """Events not finished yet, in one Redis hash (id -> JSON)."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def save(self, event: Event) -> None:
        await self._redis.hset(ASYNC_EVENTS, event.id, event.to_json())

    async def delete(self, event_id: str) -> None:
        await self._redis.hdel(ASYNC_EVENTS, event_id)

    async def all(self) -> list[Event]:
        stored = await self._redis.hgetall(ASYNC_EVENTS)
        return sorted((Event.from_json(v) for v in stored.values()), key=lambda e: e.due_at)


class DeadLetter(BaseModel):
    """An asynchronous invocation that failed for good: what it was given, how it failed,
    and the records of its attempts."""

    id: str = Field(description="the id the invocation was accepted under (its first "
                                "attempt's record)")
    function: str
    args: Any = Field(None, description="what it was invoked with (a redrive sends it again)")
    error: dict[str, Any] = Field(description="the last attempt's error (type, message, "
                                              "traceback), or why no attempt ran")
    condition: Literal["RetriesExhausted", "EventAgeExceeded"]
    reason: str
    attempts: int = Field(description="attempts that ran")
    invocation_ids: list[str] = Field(description="its attempts' records, oldest first")
    requested_at: float = Field(description="when it was accepted (epoch seconds)")
    failed_at: float


class DeadLetterStore:
    """Each function's dead letters: a hash (id -> JSON) and their order (a sorted set by
    ``failed_at``), at most ``DEAD_LETTERS_MAX`` each."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def add(self, letter: DeadLetter) -> None:
        fn = letter.function
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(dead_letters_key(fn), letter.id, letter.model_dump_json())
        pipe.zadd(dead_letter_order_key(fn), {letter.id: letter.failed_at})
        pipe.zcard(dead_letter_order_key(fn))
        *_, count = await pipe.execute()
        if count > DEAD_LETTERS_MAX:
            dropped = await self._redis.zpopmin(dead_letter_order_key(fn),
                                                count - DEAD_LETTERS_MAX)
            await self._redis.hdel(dead_letters_key(fn), *(m for m, _ in dropped))

    async def list(self, function: str) -> list[DeadLetter]:
        """Newest first."""
        ids = await self._redis.zrevrange(dead_letter_order_key(function), 0, -1)
        if not ids:
            return []
        raws = await self._redis.hmget(dead_letters_key(function), ids)
        return [DeadLetter.model_validate_json(r) for r in raws if r is not None]

    async def get(self, function: str, letter_id: str) -> DeadLetter | None:
        raw = await self._redis.hget(dead_letters_key(function), letter_id)
        return None if raw is None else DeadLetter.model_validate_json(raw)

    async def remove(self, function: str, letter_id: str) -> bool:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(dead_letters_key(function), letter_id)
        pipe.zrem(dead_letter_order_key(function), letter_id)
        removed, _ = await pipe.execute()
        return bool(removed)

    async def clear(self, function: str) -> None:
        await self._redis.delete(dead_letters_key(function), dead_letter_order_key(function))
