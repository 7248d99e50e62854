"""The one interface every backend implements: where function containers come from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from faasrl.env_layers.install import LayerError, LayerStore
from faasrl.manifest import FunctionSpec

# A zygote's state, as the cluster view shows it (``off``: the backend forks none; ``failed``:
# its imports left it unfit to fork, so containers start as new interpreters).
ZygoteState = Literal["off", "importing", "ready", "gone", "failed"]

if TYPE_CHECKING:
    from faasrl.resources import Resources



@dataclass
class ContainerHandle:
    """A started container: how to reach its runtime and how its backend knows it."""

    id: str
    function: str
    backend: str
    host: str
    port: int
    pid: int | None = None  # process backend; the Ray backend's: on its node
    node: str | None = None  # the machine it runs on, where that is not the gateway's (Ray)
    native_id: str | None = None  # the backend's own id (a Docker container id)
    secret: str | None = field(default=None, repr=False)  # the runtime's bearer token
    stem_cell: bool = False  # started generic, then specialised for its function
    init: dict[str, Any] = field(default_factory=dict)  # what /init must add for it (cwd, env)


@dataclass
class ContainerStats:
    memory_mb: float
    cpu_s: float


def builtin_dir(spec: FunctionSpec, functions_dir: Path | None, builtins_dir: str) -> str | None:
    """Where a built-in function's folder is on a machine that holds the built-ins under
    ``builtins_dir`` (an image, a Ray node); None for uploaded code (the runtime unpacks it)
    and for folders that are not the gateway's built-ins."""
    if spec.code_sha256 or not spec.code_dir or functions_dir is None:
        return None
    try:
        rel = Path(spec.code_dir).resolve().relative_to(functions_dir.resolve())
    except ValueError:
        return None
    return str(PurePosixPath(builtins_dir, *rel.parts))


class Backend(ABC):
    """Starts and stops containers that run ``faasrl.runtime``; knows nothing of pools."""

    name: str
    has_stem_cells = False  # whether start_stem works and start takes a stem cell
    # Whether the node's free cores are on every container's machine, so a run may be lent
    # them (``cpu_max``): one host's backends; not a cluster's, whose pool spans machines.
    lends_cores = True

    def zygote_state(self) -> ZygoteState | None:
        """Whether the zygote cold starts fork from has done its imports (None: this backend
        has no zygotes)."""
        return None

    def zygote_not_preloaded(self) -> dict[str, str]:
        """The modules the zygote could not import, and why (empty: none, or no zygote)."""
        return {}

    def capacity(self) -> Resources | None:
        """What the machines this backend places containers on offer now, when they and not
        the gateway's host size the node (a cluster whose nodes join and leave); None: the
        host's. Called on every maintenance tick, so it must answer from memory."""
        return None

    async def layer_store(self) -> LayerStore:
        """Where env layers for this backend's functions are installed, and for which Python
        (``faasrl.env_layers``); LayerError, saying why, where its functions cannot read
        them."""
        raise LayerError(f"requirements.txt: the {self.name} backend's functions get no env "
                         "layers")

    def check(self, spec: FunctionSpec) -> dict[str, str]:
        """Per manifest field, why this backend could not run the function (empty: it can).

        The gateway answers a deploy with these as a 422 rather than fail every start later.
        """
        return {}

    @abstractmethod
    async def start(self, spec: FunctionSpec, container_id: str, gpus: tuple[int, ...] = (),
                    stem: ContainerHandle | None = None) -> ContainerHandle:
        """Start a container whose runtime will answer on the returned endpoint, to requests
        that carry the handle's ``secret`` (made per container, never given to the handler).

        ``stem``: a ready stem cell (``start_stem``) to make this container of; where that
        fails, the stem cell is removed and a container started as without one."""

    async def start_stem(self, image: str, stem_id: str, memory_mb: int) -> ContainerHandle:
        """Start a stem cell: a generic runtime of ``image`` ("" the default) that imports
        what functions import, then waits for ``start`` to make it a function's container."""
        raise NotImplementedError(f"the {self.name} backend has no stem cells")

    @abstractmethod
    async def stop(self, handle: ContainerHandle, grace_s: float = 2.0) -> None:
        """Stop a container and everything it started; safe to call on one that already exited."""

    @abstractmethod
    def exit_code(self, handle: ContainerHandle) -> int | None:
        """The exit status of a container that stopped by itself, None while it runs."""

    @abstractmethod
    def list_own(self) -> list[ContainerHandle]:
        """Containers this platform instance runs on this backend."""

    @abstractmethod
    def reap_orphans(self) -> int:
        """Stop containers left behind by a platform instance that is gone; returns how many."""

    @abstractmethod
    def stats(self, handle: ContainerHandle) -> ContainerStats | None:
        """Memory and CPU use, None if the container is gone."""

    @abstractmethod
    def logs(self, handle: ContainerHandle, tail: int = 50) -> str:
        """The last lines the container printed."""

    @abstractmethod
    async def close(self) -> None:
        """Stop every container this instance started."""
