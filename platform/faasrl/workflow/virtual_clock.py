"""A virtual clock for the workflow engine: starts and ends released in the order a modeled
cluster of N cores would produce them, whatever order the real runs come back in.

:class:`VirtualClock` is the pure core (no I/O, no real time): invocations are submitted with a
ready time, start on a free virtual core, and end at their virtual start plus the duration the
caller reports when the real run came back. An event is released only when no running
invocation whose end is still unknown could end before it (its virtual start plus a lower
bound), so the released sequence is the one a sequential simulation with every duration known
in advance would give: a function of the submissions and durations only.
:class:`VirtualExecutor` runs it over asyncio: it starts the real work when a start is released
and hands the workflow the next released end. The design is in docs/virtual-clock.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
Kind = Literal["start", "end"]
_RANK: dict[Kind, int] = {"start": 0, "end": 1}  # at one instant, starts come before ends


@dataclass(frozen=True)
class Event(Generic[K]):
    """A released start or end; ``start`` is the invocation's virtual start either way."""

    kind: Kind
    key: K
    function: str
    time: float
    start: float
    seq: int


@dataclass
class _Invocation(Generic[K]):
    key: K
    function: str
    ready_at: float
    cores: int
    lower_bound: float
    seq: int
    start: float | None = None
    end: float | None = None  # known once the real run came back

    def order(self, kind: Kind, time: float) -> tuple[float, int, int]:
        return time, _RANK[kind], self.seq


@dataclass
class VirtualClock(Generic[K]):
    """Discrete-event scheduler over ``cores`` virtual cores, with optional per-function
    concurrency caps; see the module docstring for the release rule."""

    cores: int
    concurrency: Mapping[str, int] = field(default_factory=dict)
    now: float = 0.0
    _waiting: list[_Invocation[K]] = field(default_factory=list)
    _running: dict[K, _Invocation[K]] = field(default_factory=dict)
    _seq: int = 0

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise ValueError(f"cores must be at least 1, not {self.cores}")
        if bad := {f: n for f, n in self.concurrency.items() if n < 1}:
            raise ValueError(f"concurrency must be at least 1: {bad}")

    # ------------------------------------------------------------------ the workflow's side
    def submit(self, key: K, function: str, ready_at: float | None = None, cores: int = 1,
               lower_bound: float = 0.0) -> None:
        """An invocation, ready at ``ready_at`` (default: now), needing ``cores`` virtual cores
        (0: a timer), that cannot take less than ``lower_bound`` virtual seconds."""
        ready = self.now if ready_at is None else ready_at
        if ready < self.now:
            raise ValueError(f"{key!r}: ready at {ready}, before the virtual now {self.now}")
        if not 0 <= cores <= self.cores:
            raise ValueError(f"{key!r}: needs {cores} cores of {self.cores}")
        if lower_bound < 0:
            raise ValueError(f"{key!r}: negative lower bound {lower_bound}")
        if self._find(key) is not None:
            raise ValueError(f"{key!r}: submitted twice")
        self._waiting.append(_Invocation(key, function, ready, cores, lower_bound, self._seq))
        self._seq += 1

    def complete(self, key: K, duration: float) -> None:
        """The real run of ``key`` came back: it ends ``duration`` virtual seconds after its
        virtual start."""
        inv = self._running.get(key)
        if inv is None or inv.start is None:
            raise ValueError(f"{key!r}: completed but not running")
        if inv.end is not None:
            raise ValueError(f"{key!r}: completed twice")
        if duration < inv.lower_bound:
            raise ValueError(f"{key!r}: duration {duration} below its lower bound "
                             f"{inv.lower_bound}; the order released may be wrong")
        inv.end = inv.start + duration

    def cancel(self, key: K) -> None:
        """The workflow gave up on ``key`` (at the virtual now): it never ends, and its cores
        are free from now."""
        if (inv := self._find(key)) is None:
            raise ValueError(f"{key!r}: cancelled but unknown")
        if inv in self._waiting:
            self._waiting.remove(inv)
        else:
            del self._running[key]

    def next_event(self) -> Event[K] | None:
        """The next event if it is certain (and apply it), else None: nothing is pending, or
        an invocation whose end is unknown could still end before it."""
        candidates: list[tuple[tuple[float, int, int], Kind, _Invocation[K]]] = [
            (inv.order("end", inv.end), "end", inv)
            for inv in self._running.values() if inv.end is not None]
        if (waiting := self._startable()) is not None:
            at = max(waiting.ready_at, self.now)
            candidates.append((waiting.order("start", at), "start", waiting))
        if not candidates:
            return None
        order, kind, inv = min(candidates, key=lambda c: c[0])
        if any(order >= u.order("end", u.start + u.lower_bound)
               for u in self._running.values() if u.end is None and u.start is not None):
            return None
        self.now = order[0]
        if kind == "start":
            self._waiting.remove(inv)
            inv.start = self.now
            self._running[inv.key] = inv
        else:
            del self._running[inv.key]
        assert inv.start is not None
        return Event(kind, inv.key, inv.function, self.now, inv.start, inv.seq)

    @property
    def idle(self) -> bool:
        """Nothing waits and nothing runs."""
        return not self._waiting and not self._running

    def running(self, function: str | None = None) -> int:
        return sum(function is None or i.function == function for i in self._running.values())

    # ------------------------------------------------------------------------ internals
    def _find(self, key: K) -> _Invocation[K] | None:
        return self._running.get(key) or next((i for i in self._waiting if i.key == key), None)

    def _startable(self) -> _Invocation[K] | None:
        """The first waiting invocation, in (ready time, sequence) order, that fits the free
        cores and its function's cap now."""
        free = self.cores - sum(i.cores for i in self._running.values())
        for inv in sorted(self._waiting, key=lambda i: (i.ready_at, i.seq)):
            cap = self.concurrency.get(inv.function)
            if inv.cores <= free and (cap is None or self.running(inv.function) < cap):
                return inv
        return None


@dataclass(frozen=True)
class Outcome(Generic[K]):
    """A released end: the work's result, or the exception it raised."""

    event: Event[K]
    result: Any
    error: BaseException | None


class VirtualExecutor(Generic[K]):
    """A :class:`VirtualClock` over asyncio: work starts for real when its virtual start is
    released (so ``work`` binds its arguments then), and :meth:`next` returns ends in virtual
    order. ``duration(start, result)`` gives a finished run's virtual duration (``start``: its
    start event, which names it); a run that raised is
    given its lower bound (it failed fast) and released as a failure at that virtual end."""

    def __init__(self, clock: VirtualClock[K], duration: Callable[[Event[K], Any], float]):
        self.clock = clock
        self._duration = duration
        self._work: dict[K, Callable[[], Awaitable[Any]]] = {}
        self._bounds: dict[K, float] = {}
        self._tasks: dict[K, asyncio.Task[Any]] = {}
        self._results: dict[K, tuple[Any, BaseException | None]] = {}
        self._arrived = asyncio.Event()
        self._broken: Exception | None = None  # a duration the clock refused: a bug

    def submit(self, key: K, function: str, work: Callable[[], Awaitable[T]],
               ready_at: float | None = None, cores: int = 1, lower_bound: float = 0.0) -> None:
        self.clock.submit(key, function, ready_at, cores, lower_bound)
        self._work[key] = work
        self._bounds[key] = lower_bound

    async def cancel(self, key: K) -> None:
        self.clock.cancel(key)
        self._work.pop(key, None)
        self._bounds.pop(key, None)
        self._results.pop(key, None)
        if (task := self._tasks.pop(key, None)) is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._arrived.set()  # what it held up may be certain now

    async def next(self) -> Outcome[K] | None:
        """The next end in virtual order, once it is certain; None when nothing is left."""
        while True:
            if self._broken is not None:
                raise self._broken
            event = self.clock.next_event()
            if event is None:
                if self.clock.idle:
                    return None
                self._arrived.clear()
                await self._arrived.wait()
            elif event.kind == "start":  # the work binds its arguments now, not when it runs
                work = self._work.pop(event.key)()
                self._tasks[event.key] = asyncio.create_task(self._run(event, work))
            else:
                result, error = self._results.pop(event.key)
                return Outcome(event, result, error)

    async def _run(self, event: Event[K], work: Awaitable[Any]) -> None:
        bound = self._bounds.pop(event.key)
        error: Exception | None = None
        try:
            result = await work
        except Exception as exc:  # released as a failure at its virtual end
            result, error = None, exc
        del self._tasks[event.key]
        self._results[event.key] = (result, error)
        try:
            self.clock.complete(event.key, bound if error else
                                self._duration(event, result))
        except Exception as exc:
            self._broken = exc
        self._arrived.set()
