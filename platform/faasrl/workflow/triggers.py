"""ARTOS's trigger primitives, bound to a job's
:class:`~faasrl.workflow.trigger_buffer.TriggerBuffer`.

``check(buffer)`` runs after every buffer change and returns ``(satisfied, message)``; the rule
holding the trigger then runs its action with the message (which batches, which version, which
key to move). A trigger that fires on a change (an object's new version, a period elapsed)
remembers what it fired on; data triggers do not, since the action takes the data it is handed.

Control logic as triggers (ARTOS, Table 3): full-batch update = DataKeyTrigger(n=actors);
FIFO training = DataKeyTrigger(n=1); pipeline training = DataKeyTrigger(keys=...); actor
invocation and on-policy sync = ObjectKeyTrigger(policy); off-policy sync and periodic sampling
= TimeTrigger(t); pipelined transfer = TransferTrigger(keys).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from faasrl.workflow.trigger_buffer import TRAJECTORIES, Item, TriggerBuffer

Message = dict[str, Any]


class Trigger(Protocol):
    def check(self, buffer: TriggerBuffer) -> tuple[bool, Message]: ...


def _count(n: int | Callable[[], int]) -> int:
    return n() if callable(n) else n


@dataclass
class DataKeyTrigger:
    """Satisfied when ``n`` actors (slots) each put an entry of at least ``size`` rows of the
    data ``keys`` into ``stream``; the message hands over one entry per slot, oldest first.
    ``n`` may be a callable: a round's actor count is the controller's decision."""

    n: int | Callable[[], int] = 1
    size: int = 0
    keys: Sequence[str] = ()
    stream: str = TRAJECTORIES

    def check(self, buffer: TriggerBuffer) -> tuple[bool, Message]:
        n, wanted = _count(self.n), set(self.keys)
        chosen: dict[int, Item] = {}
        for item in buffer.pending(self.stream):
            if item.slot not in chosen and item.size >= self.size and wanted <= item.keys:
                chosen[item.slot] = item
        if n < 1 or len(chosen) < n:
            return False, {}
        return True, {"items": list(chosen.values())[:n]}


@dataclass
class ObjectKeyTrigger:
    """Satisfied when the object ``key`` (a policy version) is there: with ``new_only``, once
    per version it has not fired on (on-policy: the next round starts from each new version);
    without, whenever it exists (asynchronous actors take the newest one)."""

    key: str
    new_only: bool = True
    _fired: int | None = field(default=None, init=False)

    def check(self, buffer: TriggerBuffer) -> tuple[bool, Message]:
        version = buffer.objects.get(self.key)
        if version is None or (self.new_only and version == self._fired):
            return False, {}
        self._fired = version
        return True, {"key": self.key, "version": version}

    def reset(self) -> None:
        self._fired = None


@dataclass
class TimeTrigger:
    """Satisfied once ``seconds`` passed since it last fired (or was made); ``deadline()`` lets
    the workflow sleep exactly until then instead of polling."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    _last: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._last = self.clock()

    def check(self, buffer: TriggerBuffer) -> tuple[bool, Message]:
        now = self.clock()
        if now - self._last < self.seconds:
            return False, {}
        elapsed, self._last = now - self._last, now
        return True, {"elapsed_s": elapsed}

    def deadline(self) -> float:
        return self._last + self.seconds


@dataclass
class TransferTrigger:
    """Moves an entry's data ``keys`` from a worker-side cache to the central buffer in this
    order (pipelining: rewards and values first, so advantages can be computed while the
    observations still travel). Satisfied when the next key in order of some entry is staged;
    the message names the entry and that key, and the trigger counts it moved."""

    keys: Sequence[str]
    _moved: dict[str, int] = field(default_factory=dict, init=False)

    def check(self, buffer: TriggerBuffer) -> tuple[bool, Message]:
        for entry, staged in buffer.staged.items():
            done = self._moved.get(entry, 0)
            if done < len(self.keys) and self.keys[done] in staged:
                self._moved[entry] = done + 1
                return True, {"entry": entry, "key": self.keys[done],
                              "last": done + 1 == len(self.keys)}
        return False, {}


def always() -> bool:
    return True


@dataclass
class Rule:
    """When ``trigger`` is satisfied and ``ready()`` (capacity: a free learner slot, an idle
    actor; not a buffer condition), run ``action`` with the trigger's message."""

    name: str
    trigger: Trigger
    action: Callable[[Message], None]
    ready: Callable[[], bool] = always
