"""Namespaces: what a team owns on a shared gateway, and who a request acts as.

A function, code archive, job, model, invocation record or dead letter belongs to one namespace.
Inside the platform (invoker, pool, records, metrics, Redis keys) a function is known by its
*qualified* name: ``<namespace>.<name>``, or the bare name in namespace ``default`` — so a
gateway that only ever had the one bearer token keeps its names, keys and series. ``.`` is never
part of a function's or a namespace's own name, so a qualified name splits one way only. The
API speaks bare names: routers qualify what they are given with the caller's namespace and show
bare names back (``qualify`` / ``local_name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

DEFAULT = "default"
NAMESPACE_NAME = r"^[a-z0-9][a-z0-9-]{0,31}$"  # DNS-label-like; also the API's path parameter
SEPARATOR = "."

Role = Literal["read", "write", "admin"]  # read: GET only; write: + change; admin: + its keys
ROLES: tuple[str, ...] = get_args(Role)


def qualify(namespace: str, name: str) -> str:
    """The platform's name of ``namespace``'s function (or scheduler) ``name``."""
    return name if namespace == DEFAULT else f"{namespace}{SEPARATOR}{name}"


def namespace_of(qualified: str) -> str:
    namespace, sep, _ = qualified.partition(SEPARATOR)
    return namespace if sep else DEFAULT


def local_name(qualified: str) -> str:
    """The name its namespace's keys use."""
    _, sep, name = qualified.partition(SEPARATOR)
    return name if sep else qualified


def owns(namespace: str, qualified: str) -> bool:
    return namespace_of(qualified) == namespace


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: a namespace, a role, and the key that said so.

    ``root``: the gateway's own token (``FAASRL_TOKEN``), or any request when the gateway has
    none — the admin of ``default``, who also creates namespaces and may act in any namespace.
    """

    namespace: str
    role: Role
    key_id: str | None = None
    root: bool = False

    @property
    def can_write(self) -> bool:
        return self.role != "read"

    @property
    def can_admin(self) -> bool:
        return self.role == "admin"


ROOT = Principal(DEFAULT, "admin", root=True)


class Quota(BaseModel):
    """What a namespace may hold at once (None: no limit). Requests beyond it wait, then 429."""

    model_config = ConfigDict(extra="forbid")

    cores: float | None = Field(None, gt=0, description="cores of busy containers")
    memory_mb: int | None = Field(None, gt=0, description="memory of its containers")
    gpus: int | None = Field(None, ge=0)
    containers: int | None = Field(None, ge=0, description="containers it holds at once")
    jobs: int | None = Field(None, ge=0, description="jobs running at once")
    spend_usd_per_day: float | None = Field(
        None, ge=0, description="the cost model's USD over the last 24 h; a job beyond it pauses")


class Namespace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAMESPACE_NAME)
    quota: Quota = Field(default_factory=Quota)
    created_at: float = 0.0
