"""Runs a workflow's rules: fire what the buffer satisfies, wait for the functions that started.

Actions start function invocations, each with a callback that gets its result and updates the
buffer (and the round's accounting). The engine checks every rule after each change until none
fires, then waits for the next invocation to finish, or for the nearest TimeTrigger's deadline.
Invocations carry a kind (actor, learner, parameter, buffer) so that a workflow can let one kind
run across rounds (asynchronous actors) while cancelling the others when a round fails.

On real time (the default) an invocation starts when its action runs and its callback runs when
it comes back. On a virtual clock (``clock: virtual``, docs/virtual-clock.md) a
:class:`~faasrl.workflow.virtual_clock.VirtualExecutor` decides both: an invocation starts when
a virtual core is free for it, and results are handed over in virtual order. That is why an
action passes a work factory, not a running coroutine: the factory is called at the start, so
the arguments it binds (the policy version) are the ones current then.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from faasrl.workflow.trigger_buffer import TriggerBuffer
from faasrl.workflow.triggers import Rule, TimeTrigger
from faasrl.workflow.virtual_clock import Outcome, VirtualExecutor

Done = Callable[[Any], Awaitable[None] | None]  # an invocation's callback, given its result
Work = Callable[[], Awaitable[Any]]  # starts an invocation: called when it starts
MAX_PASSES = 10_000  # rule passes after one change: more means an action that consumes nothing


class WorkflowStalled(RuntimeError):
    """Nothing runs and no rule fires, yet the round is not done."""


class Engine:
    def __init__(self, buffer: TriggerBuffer, rules: Sequence[Rule],
                 executor: VirtualExecutor[int] | None = None,
                 lower_bounds: Mapping[str, float] | None = None):
        """``executor``: time the workflow on its virtual clock instead of real time;
        ``lower_bounds``: per kind, the virtual seconds an invocation of it takes at least (see
        VirtualClock)."""
        if executor is not None and any(isinstance(r.trigger, TimeTrigger) for r in rules):
            raise ValueError("time triggers do not run on a virtual clock yet")
        self.buffer = buffer
        self.rules = list(rules)
        self.executor = executor
        self._bounds = dict(lower_bounds or {})
        self._running: dict[Hashable, tuple[str, Done]] = {}  # a task, or a virtual key
        self._keys = itertools.count()
        self._held: list[Outcome[int]] = []  # virtual ends of kinds a wait did not want
        # On a virtual clock, per kind: the virtual seconds and the number of the ends released
        # (what the modeled cluster would bill; cancelled invocations never end).
        self.virtual_seconds: dict[str, float] = {}
        self.virtual_ends: dict[str, int] = {}

    def start(self, kind: str, work: Work, done: Done) -> None:
        """Run ``work()`` (a function invocation); ``done`` gets its result when it finishes
        (it may be a coroutine function: a callback that writes to Redis)."""
        if self.executor is None:
            self._running[asyncio.ensure_future(work())] = (kind, done)
            return
        key = next(self._keys)
        self.executor.submit(key, kind, work, lower_bound=self._bounds.get(kind, 0.0))
        self._running[key] = (kind, done)

    def running(self, kind: str) -> int:
        return sum(k == kind for k, _ in self._running.values())

    @property
    def now(self) -> float:
        """The virtual now (the time of the last event released); real time has none: 0."""
        return self.executor.clock.now if self.executor is not None else 0.0

    def fire(self) -> None:
        """Run the action of every rule its trigger and capacity allow, until none fires."""
        for _ in range(MAX_PASSES):
            fired = False
            for rule in self.rules:
                if not rule.ready():
                    continue
                satisfied, message = rule.trigger.check(self.buffer)
                if satisfied:
                    rule.action(message)
                    fired = True
            if not fired:
                return
        raise WorkflowStalled(f"rules fired {MAX_PASSES} passes in a row without settling")

    async def run(self, finished: Callable[[], bool]) -> None:
        """Fire and wait until ``finished()``; a callback's exception ends the run (the caller
        decides which invocations to cancel)."""
        while not finished():
            self.fire()
            if finished():
                return
            timeout = self._timeout()
            if not self._running and timeout is None:
                raise WorkflowStalled("no function runs and no rule fires")
            await self._wait(timeout)

    async def wait_for(self, kind: str) -> None:
        """Let every invocation of ``kind`` finish, running their callbacks (no rule fires)."""
        while self.running(kind):
            await self._wait(None, only=kind)

    async def call(self, kind: str, work: Work) -> Any:
        """One invocation, awaited (on a virtual clock: started and ended on it)."""
        if self.executor is None:
            return await work()
        results: list[Any] = []
        self.start(kind, work, results.append)
        while not results:
            await self._wait(None, only=kind)
        return results[0]

    async def cancel(self, kinds: Sequence[str]) -> None:
        """Cancel the invocations of these kinds (their callbacks never run)."""
        doomed = [key for key, (k, _) in self._running.items() if k in kinds]
        for key in doomed:
            del self._running[key]
        self._held = [o for o in self._held if o.event.function not in kinds]
        if self.executor is not None:
            for key in doomed:
                await self.executor.cancel(key)
            return
        for task in doomed:
            task.cancel()
        await asyncio.gather(*doomed, return_exceptions=True)

    async def settle(self, kinds: Sequence[str]) -> list[Any]:
        """Let the invocations of these kinds end without their callbacks; returns their
        results (an exception stands in for one that raised)."""
        keys = [key for key, (k, _) in self._running.items() if k in kinds]
        for key in keys:
            del self._running[key]
        if self.executor is None:
            return list(await asyncio.gather(*keys, return_exceptions=True))
        mine, out = set(keys), []
        while mine:
            o = await self._next_of(lambda o: o.event.key in mine)
            mine.discard(o.event.key)
            out.append(o.error or o.result)
        return out

    def _timeout(self) -> float | None:
        deadlines = [r.trigger.deadline() for r in self.rules
                     if isinstance(r.trigger, TimeTrigger)]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    async def _wait(self, timeout: float | None, only: str | None = None) -> None:
        if self.executor is not None:
            await self._wait_virtual(only)
            return
        pending = [t for t, (k, _) in self._running.items() if only is None or k == only]
        if not pending:  # only a TimeTrigger can fire next
            await asyncio.sleep(timeout or 0.0)
            return
        done, _ = await asyncio.wait(pending, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            _, callback = self._running.pop(task)
            await _called(callback, task.result())

    async def _wait_virtual(self, only: str | None) -> None:
        """The next end in virtual order (of ``only``'s kind: others are held for later)."""
        outcome = await self._next_of(lambda o: only is None or o.event.function == only)
        _, callback = self._running.pop(outcome.event.key)
        if outcome.error is not None:
            raise outcome.error
        await _called(callback, outcome.result)

    async def _next_of(self, wanted: Callable[[Outcome[int]], bool]) -> Outcome[int]:
        """The first end in virtual order that ``wanted`` takes: a held one, else the next the
        clock releases; the ends it passes over are held for a later wait."""
        held = next((o for o in self._held if wanted(o)), None)
        if held is not None:
            self._held.remove(held)
            return held
        assert self.executor is not None
        while (outcome := await self.executor.next()) is not None:
            kind, event = outcome.event.function, outcome.event
            self.virtual_seconds[kind] = self.virtual_seconds.get(kind, 0.0) + \
                event.time - event.start
            self.virtual_ends[kind] = self.virtual_ends.get(kind, 0) + 1
            if wanted(outcome):
                return outcome
            self._held.append(outcome)
        raise WorkflowStalled("the virtual clock has nothing left to run")


async def _called(callback: Done, result: Any) -> None:
    if inspect.isawaitable(outcome := callback(result)):
        await outcome
