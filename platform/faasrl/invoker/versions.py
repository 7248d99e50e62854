"""Published versions of a function and the aliases that route to them (Lambda's semantics).

A version is an immutable snapshot of a function's manifest (its code as an archive digest,
its config in ``env``), registered with the invoker as a deployable of its own under
``versioned(name, n)``: the pool keeps its warm containers apart from $LATEST's and from other
versions', so updating the function never changes what a version runs. An alias names one
version, and optionally a second one that gets a fraction of its invocations (a canary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

VERSION_SEP = ":"  # never part of a function's or a namespace's own name
LATEST = "$LATEST"
ALIAS_NAME = r"^[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*$"  # Lambda's: not all digits
ALIAS_MAX = 128


def versioned(function: str, version: int) -> str:
    """The invoker's name of ``function``'s (qualified) published ``version``."""
    return f"{function}{VERSION_SEP}{version}"


def is_version(name: str) -> bool:
    """Whether an invoker name is a published version's (not a function's $LATEST)."""
    return VERSION_SEP in name


@dataclass(frozen=True)
class FunctionVersion:
    """One published version: its number, the digest that says whether a publish changed
    anything (code + manifest + config), the manifest it runs (as JSON) and when."""

    version: int
    digest: str
    spec: dict[str, Any]
    created_at: float
    description: str = ""


@dataclass
class Alias:
    """A name for a version; ``extra`` gets ``weight`` of the invocations (a canary).

    Routing is counted, not random: of every run of invocations, the k-th goes to ``extra``
    when ``floor(k * weight)`` steps up, so any 1/weight in a row send exactly one there."""

    version: int
    extra: int | None = None
    weight: float = 0.0
    description: str = ""
    _count: int = field(default=0, compare=False, repr=False)

    def route(self) -> int:
        """The version the next invocation runs."""
        if self.extra is None:
            return self.version
        self._count += 1
        step = math.floor(self._count * self.weight) > math.floor((self._count - 1) * self.weight)
        return self.extra if step else self.version

    def versions(self) -> set[int]:
        return {self.version} if self.extra is None else {self.version, self.extra}

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "extra": self.extra, "weight": self.weight,
                "description": self.description}
