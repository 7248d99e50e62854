"""One shape for every extension point: a name -> factory registry.

Algorithms, workflows (a job's ``execution``), controllers and backends each keep one
:class:`Registry`; the job spec's and the settings' ``Literal``s and unions are built from it, so
a new entry is one line next to its kind's others and nothing else to edit. Each kind describes
the surface its entries must have as a ``typing.Protocol`` next to its registry, and
``tests/unit/test_extension_points.py`` walks every entry of every registry against it.

An entry may be registered as ``"package.module:attribute"``: it is imported on first lookup,
so a registry whose entries import what their registrant may not (the gateway imports no
torch, a job spec imports no workflow) still names them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Literal, TypeVar, overload

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Names, in registration order, to entries of one kind (a dict, read-only but for
    :meth:`register` and :meth:`unregister`)."""

    def __init__(self, kind: str):
        self.kind = kind  # the field that names an entry: its error messages say it
        self._entries: dict[str, T | str] = {}

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, entry: T | str) -> T | str: ...

    def register(self, name: str, entry: Any = None) -> Any:
        """Add ``entry`` (or, as a decorator, what it decorates) under ``name``; a name is
        registered once."""
        if entry is None:
            return lambda decorated: self.register(name, decorated)
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's throwaway entry)."""
        del self._entries[name]

    def __getitem__(self, name: str) -> T:
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            resolved: Any = importlib.import_module(module)
            for part in attribute.split(".") if attribute else ():
                resolved = getattr(resolved, part)
            self._entries[name] = entry = resolved
        return entry  # type: ignore[return-value]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str, default: Any = None) -> Any:  # Mapping's, without its try/except
        return self[name] if name in self._entries else default

    def require(self, name: str) -> T:
        """The entry ``name``; unknown, a ValueError naming the choices (a 4xx at the edge)."""
        if name not in self._entries:
            raise ValueError(f"{self.kind} must be one of {list(self._entries)}, not {name!r}")
        return self[name]

    def literal(self) -> Any:
        """``Literal[<the names>]``: a pydantic field that takes exactly the registered names
        (built when the model is defined, so register before)."""
        return Literal[tuple(self._entries)]  # type: ignore[valid-type]
