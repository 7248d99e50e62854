"""The buffer a workflow's triggers are bound to: what the job's functions put into its data plane.

The data itself lives in Redis (trajectory and gradient streams, versioned policy objects), where
functions write it. Each function's result says what it wrote, and the workflow receives every
result anyway, so the buffer is kept from those results: an entry per batch or gradient not yet
consumed, the newest version of each object, and the data keys staged on a worker but not yet
moved to the central buffer (pipelined transfer). No polling: a change is a result that arrived.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

TRAJECTORIES = "trajectories"  # actors' batches, consumed by learners
GRADIENTS = "gradients"  # asynchronous learners' gradients, consumed by the parameter function
POLICY = "policy"  # the published policy version, read by actors and learners
MEMORY = "memory"  # off-policy: the replay memory, one item whose size is the memory's
SAMPLES = "samples"  # off-policy: batches the buffer function sampled, consumed by the learner


@dataclass(frozen=True)
class Item:
    """One entry of a buffer stream: who wrote it, with which policy version, how many rows
    of which data keys."""

    entry: str
    slot: int
    version: int | None = None
    size: int = 0
    keys: frozenset[str] = frozenset()


@dataclass
class TriggerBuffer:
    streams: dict[str, list[Item]] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    staged: dict[str, list[str]] = field(default_factory=dict)  # entry -> keys on the worker

    def put(self, stream: str, item: Item) -> None:
        self.streams.setdefault(stream, []).append(item)

    def pending(self, stream: str) -> list[Item]:
        """The stream's entries no consumer has taken, oldest first."""
        return list(self.streams.get(stream, ()))

    def take(self, stream: str, items: Iterable[Item]) -> None:
        """Hand entries to a consumer: no trigger sees them again."""
        gone = set(items)
        self.streams[stream] = [i for i in self.streams.get(stream, ()) if i not in gone]

    def drain(self, stream: str) -> list[Item]:
        """Take every pending entry of a stream."""
        return self.streams.pop(stream, [])

    def publish(self, key: str, version: int) -> None:
        self.objects[key] = version

    def stage(self, entry: str, key: str) -> None:
        """A data key of ``entry`` is ready in a worker-side cache (see TransferTrigger)."""
        self.staged.setdefault(entry, []).append(key)

    def clear(self) -> None:
        """Forget everything (a round that starts afresh)."""
        self.streams.clear()
        self.objects.clear()
        self.staged.clear()
