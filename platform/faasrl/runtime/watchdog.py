"""Deadlines of runs that execute on their connections' threads.

A run's handler is called on the thread that read its request (a hand-off to a worker thread
cost two thread switches per run), so nothing waits on it with a timeout. One long-lived
thread does instead: it sleeps until the earliest deadline of the runs in progress and acts
only if that run is still going. Runs that start later than the one it sleeps on (a warm
runtime's usual case: the same ``deadline_s`` every time) do not wake it; only the first run
after an idle spell, or one with an earlier deadline, does.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from faasrl.runtime.logs import Tail


class Run:
    """One run in progress: when it started, when it must end, how to answer for it, and
    what it has written so far (``runtime/logs.py``; None: not captured)."""

    __slots__ = ("deadline", "deadline_s", "log", "reply", "start")

    def __init__(self, start: float, deadline_s: float, reply: Callable[[int, bytes], None]):
        self.start, self.deadline_s, self.reply = start, deadline_s, reply
        self.log: Tail | None = None
        self.deadline = start + deadline_s


def _deadline(run: Run) -> float:
    return run.deadline


class Watchdog:
    """Calls ``on_overrun(run)`` (once, on its own thread) for the first run that outlives its
    deadline; ``end`` tells a run's thread whether it may still answer."""

    def __init__(self, on_overrun: Callable[[Run], None]):
        self._on_overrun = on_overrun
        self._lock = threading.Lock()
        self._runs: set[Run] = set()
        self._wake = threading.Event()
        self._wake_at = math.inf  # the deadline the watchdog sleeps until
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    def begin(self, run: Run) -> None:
        with self._lock:
            self._runs.add(run)
        if run.deadline < self._wake_at:
            self._wake.set()

    def end(self, run: Run) -> bool:
        """Take the run back; False once the watchdog has claimed it (it answers for it)."""
        with self._lock:
            if run not in self._runs:
                return False
            self._runs.remove(run)
            return True

    def _watch(self) -> None:
        while True:
            self._wake.clear()  # before looking: a run begun after the look sets it again
            with self._lock:
                first = min(self._runs, key=_deadline, default=None)
                now = time.monotonic()
                if first is not None and first.deadline <= now:
                    self._runs.remove(first)
                    break
                self._wake_at = math.inf if first is None else first.deadline
            self._wake.wait(None if first is None
                            else min(first.deadline - now, threading.TIMEOUT_MAX))
        self._on_overrun(first)
