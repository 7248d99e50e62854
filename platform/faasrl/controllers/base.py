"""The controller interface: once per round, how many actors the round gets."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RoundContext:
    """What a controller sees before round ``round`` (counted from 0)."""

    round: int
    history: list[dict[str, Any]] = field(default_factory=list)  # metrics rows so far
    budget_left_usd: float | None = None


class Controller(ABC):
    @abstractmethod
    def actors(self, ctx: RoundContext) -> int:
        """I_k: the number of actor functions to invoke in this round (at least 1)."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state, checkpointed with the job so a resumed job continues where it was."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what ``state_dict`` returned (stateless controllers keep nothing)."""
