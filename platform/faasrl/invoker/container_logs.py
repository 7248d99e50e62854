"""What a function's containers wrote outside any invocation: their imports' output, threads
writing between runs (``runtime/logs.py``). The runtime hands it over with its next answer
(``container_logs`` of ``/init`` and ``/run``); the invoker keeps it here, in memory, per
container: the last ``LOG_MAX`` bytes each, for ``keep_s``."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from faasrl.runtime.logs import LOG_MAX


@dataclass(frozen=True, slots=True)
class ContainerOutput:
    at: float  # epoch seconds it reached the invoker
    function: str
    container: str
    text: str


class ContainerLogs:
    """A ring per container, bounded by bytes (``LOG_MAX``) and age (``keep_s``)."""

    def __init__(self, keep_s: float):
        self.keep_s = keep_s
        self._rings: dict[str, deque[ContainerOutput]] = {}
        self._bytes: dict[str, int] = {}

    def add(self, function: str, container: str, text: str) -> None:
        if not text:
            return
        text = text[-LOG_MAX:]
        ring = self._rings.setdefault(container, deque())
        ring.append(ContainerOutput(time.time(), function, container, text))
        self._bytes[container] = self._bytes.get(container, 0) + len(text)
        while self._bytes[container] > LOG_MAX:
            self._bytes[container] -= len(ring.popleft().text)
        self._prune()

    def recent(self, function: str) -> list[ContainerOutput]:
        """The function's containers' output still kept, oldest first."""
        self._prune()
        return sorted((out for ring in self._rings.values() for out in ring
                       if out.function == function), key=lambda out: out.at)

    def _prune(self) -> None:
        oldest = time.time() - self.keep_s
        for container, ring in list(self._rings.items()):
            while ring and ring[0].at < oldest:
                self._bytes[container] -= len(ring.popleft().text)
            if not ring:
                del self._rings[container], self._bytes[container]
