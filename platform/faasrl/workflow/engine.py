"""Runs a workflow's rules: fire what the buffer satisfies, wait for the functions that started.

Actions start function invocations as tasks, each with a callback that gets its result and
updates the buffer (and the round's accounting). The engine checks every rule after each change
until none fires, then waits for the next task to finish, or for the nearest TimeTrigger's
deadline. Tasks carry a kind (actor, learner, parameter) so that a workflow can let one kind run
across rounds (asynchronous actors) while cancelling the others when a round fails.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from faasrl.workflow.buffer import Buffer
from faasrl.workflow.triggers import Rule, TimeTrigger

Done = Callable[[Any], Awaitable[None] | None]  # a task's callback, given its result
MAX_PASSES = 10_000  # rule passes after one change: more means an action that consumes nothing


class WorkflowStalled(RuntimeError):
    """Nothing runs and no rule fires, yet the round is not done."""


class Engine:
    def __init__(self, buffer: Buffer, rules: Sequence[Rule]):
        self.buffer = buffer
        self.rules = list(rules)
        self._tasks: dict[asyncio.Task[Any], tuple[str, Done]] = {}

    def start(self, kind: str, work: Coroutine[Any, Any, Any],
              done: Done) -> asyncio.Task[Any]:
        """Run ``work`` (a function invocation); ``done`` gets its result when it finishes
        (it may be a coroutine function: a callback that writes to Redis)."""
        task = asyncio.create_task(work)
        self._tasks[task] = (kind, done)
        return task

    def running(self, kind: str) -> int:
        return sum(k == kind for k, _ in self._tasks.values())

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
        decides which tasks to cancel)."""
        while not finished():
            self.fire()
            if finished():
                return
            timeout = self._timeout()
            if not self._tasks and timeout is None:
                raise WorkflowStalled("no function runs and no rule fires")
            await self._wait(timeout)

    async def wait_for(self, kind: str) -> None:
        """Let every task of ``kind`` finish, running their callbacks (no rule fires)."""
        while self.running(kind):
            await self._wait(None, only=kind)

    async def cancel(self, kinds: Sequence[str]) -> None:
        """Cancel the tasks of these kinds (their callbacks never run)."""
        doomed = [t for t, (k, _) in self._tasks.items() if k in kinds]
        for task in doomed:
            task.cancel()
            del self._tasks[task]
        await asyncio.gather(*doomed, return_exceptions=True)

    async def settle(self, kinds: Sequence[str]) -> list[Any]:
        """Let the tasks of these kinds end without their callbacks; returns their results
        (an exception stands in for a task that raised)."""
        tasks = [t for t, (k, _) in self._tasks.items() if k in kinds]
        for task in tasks:
            del self._tasks[task]
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    def _timeout(self) -> float | None:
        deadlines = [r.trigger.deadline() for r in self.rules
                     if isinstance(r.trigger, TimeTrigger)]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    async def _wait(self, timeout: float | None, only: str | None = None) -> None:
        pending = [t for t, (k, _) in self._tasks.items() if only is None or k == only]
        if not pending:  # only a TimeTrigger can fire next
            await asyncio.sleep(timeout or 0.0)
            return
        done, _ = await asyncio.wait(pending, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            _, callback = self._tasks.pop(task)
            if inspect.isawaitable(outcome := callback(task.result())):
                await outcome
