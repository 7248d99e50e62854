"""Who an invocation is for, as the pool shares capacity and holds quotas.

``key`` is the sharer (a job's ``job:<id>``; a plain invocation's function), ``namespace``
whose quota it counts against, ``weight`` its share relative to others that contend (a job's
``priority``), ``job`` the job's id when it is one (its invocations' records say so: a job's logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from faasrl.namespaces import namespace_of


@dataclass(frozen=True, slots=True)
class Tenant:
    key: str
    namespace: str
    weight: float = 1.0
    job: str | None = None

    @staticmethod
    def of_function(function: str) -> Tenant:
        """A plain invocation's: its function's, in the function's namespace (one per function,
        made once: the warm path asks for it on every invocation)."""
        return _own(function)

    @staticmethod
    def of_job(job: str, namespace: str, priority: float) -> Tenant:
        """A job's: keyed ``job:<id>``, which no function's name can be (a function named
        like a job's id would otherwise share its usage and weight)."""
        return Tenant(f"job:{job}", namespace, priority, job)


@lru_cache(maxsize=4096)
def _own(function: str) -> Tenant:
    return Tenant(function, namespace_of(function))
