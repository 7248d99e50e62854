"""The Ray backend: every container is a Ray actor that runs ``faasrl.runtime`` on its node.

Ray places the actor (``ray_actor.RuntimeActor``) with the function's ``memory_mb`` as
``memory``, ``gpu`` as ``num_gpus`` (the actor's GPUs are the ones Ray assigns it) and the
manifest's ``ray`` section (custom resources, SPREAD or PACK, node labels), all held for the
actor's life as the pool holds them. Cores are not: an actor reserves only ``PLACEMENT_CPU`` of
Ray's CPU (enough to keep it off nodes with no cores), and the pool counts a container's
``cpu`` while it starts or runs, as on one machine. Ray would hold ``num_cpus`` until the actor
is killed, so a job whose functions together ask more cores than the cluster has (2 actors and
a learner on 2 cores) would lose its idle learner to eviction every round.

Cold starts: with ``zygote`` on, the backend places a zygote actor (``ray_zygote``) on every
node that can hold containers, as nodes join (the poll below); a container's actor asks its
node's to fork the runtime, as the process backend forks from its zygote. Where there is none,
it is gone, failed or still importing past ``ZYGOTE_WAIT_S``, or the function is too small to
hold a fork, the actor starts the runtime as its own child, a new interpreter. A zygote actor
holds no resources; it goes with its node, and with the gateway as container actors do.

The actor says where the runtime listens; from then on the invoker
speaks ``/init`` and ``/run`` to it over HTTP as to any container, and uploaded code arrives
through ``/init`` (``code_sha256``), as in Docker: nodes share no filesystem with the gateway.
Built-in functions are on every node (the runtime image, or this checkout on a local cluster).

The node's capacity is the cluster's: the sum of its alive nodes, polled once a second, so it
follows nodes joining and leaving. A function that fits no single node is refused at deploy
(422), at a job's submit (422) and at start, never left pending.

Actors are named ``<node>/<owner>/<container id>`` in one namespace (``faasrl``): ``node`` is
this gateway's ``node_name`` and ``owner`` its process (pid and start time). They are not
detached, so Ray kills them with the gateway that made them; a gateway that starts kills any of
its node's whose owner is gone, and never touches other nodes' or a live owner's. A container
whose actor or node dies is seen from Ray's own state: the actor's ``wait_exit`` call fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray._private import ray_constants
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats, builtin_dir
from faasrl.backends.process import owner_alive, owner_label
from faasrl.backends.ray_actor import RuntimeActor
from faasrl.backends.ray_local import LocalRayCluster, loopback_driver
from faasrl.backends.ray_zygote import ZygoteActor, zygote_name
from faasrl.env_layers.install import LayerError, LayerStore
from faasrl.env_layers.target import TargetError, interpreter_target
from faasrl.manifest import FunctionSpec, RayPlacement
from faasrl.resources import Resources

if TYPE_CHECKING:
    from faasrl.config import Settings

log = logging.getLogger(__name__)
NODES_POLL_S = 1.0  # how often the cluster's nodes (capacity) are read
ACTOR_THREADS = 4  # wait_exit blocks one for the container's life; stop/stats/logs use others
PLACEMENT_CPU = 0.001  # of Ray's CPU an actor reserves: a node with cores, never its cores
_STATS_MAX_AGE_S = 2.0
_MB = 2**20


@dataclass(frozen=True)
class RayConfig:
    """What the backend needs from the platform's settings."""

    node: str
    address: str | None = None  # None: start a local one-node cluster
    namespace: str = "faasrl"
    functions_dir: Path | None = None  # the gateway's built-in functions
    builtins_dir: str | None = None  # the same on the Ray nodes; None: functions_dir
    log_dir: Path | None = None  # the local cluster's log
    local_cpu: float | None = None  # the local cluster's resources; None: the host's
    local_memory_mb: int | None = None
    local_gpus: int | None = None
    env_layers_dir: Path | None = None  # a local cluster's functions read env layers here
    zygote: bool = False  # a zygote per node, that containers fork from


def actor_name(node: str, owner: str, container_id: str) -> str:
    return f"{node}/{owner}/{container_id}"


def actor_options(spec: FunctionSpec, name: str, namespace: str) -> dict[str, Any]:
    """The options of the container's actor: its name and what Ray reserves for it where.
    The manifest's strategy (SPREAD by default: Ray no longer sees the cores a container runs
    on, so spreading is what keeps the nodes evenly busy; PACK is Ray's DEFAULT)."""
    placement = spec.ray or RayPlacement()
    options: dict[str, Any] = {
        "name": name, "namespace": namespace, "num_cpus": PLACEMENT_CPU, "num_gpus": spec.gpu,
        "memory": spec.memory_mb * _MB, "max_concurrency": ACTOR_THREADS, "max_restarts": 0,
        "scheduling_strategy": "SPREAD" if placement.strategy == "SPREAD" else "DEFAULT"}
    if placement.resources:
        options["resources"] = dict(placement.resources)
    if placement.node_label:
        options["label_selector"] = dict(placement.node_label)
    return options


def node_shortfall(spec: FunctionSpec, nodes: list[dict[str, Any]]) -> dict[str, str]:
    """Per manifest field, why no alive node of the cluster could hold one container of
    ``spec`` (empty: one can). ``nodes``: ``ray.nodes()``."""
    alive = [n for n in nodes if n.get("Alive")]
    if not alive:
        return {"ray": "the Ray cluster has no alive node"}
    custom = dict(spec.ray.resources) if spec.ray else {}
    labels = dict(spec.ray.node_label) if spec.ray else {}
    need = {"CPU": spec.cpu, "memory": spec.memory_mb * _MB, "GPU": float(spec.gpu), **custom}
    field_of = {"CPU": "cpu", "memory": "memory_mb", "GPU": "gpu"}

    def fits(node: dict[str, Any]) -> bool:
        have, tags = node.get("Resources", {}), node.get("Labels", {})
        return (all(have.get(k, 0.0) + 1e-9 >= v for k, v in need.items() if v > 0)
                and all(tags.get(k) == v for k, v in labels.items()))

    if any(fits(n) for n in alive):
        return {}
    out: dict[str, str] = {}
    for key, amount in need.items():
        if amount > 0 and not any(n.get("Resources", {}).get(key, 0.0) + 1e-9 >= amount
                                  for n in alive):
            most = max(n.get("Resources", {}).get(key, 0.0) for n in alive)
            shown = (f"{amount / _MB:g} MB", f"{most / _MB:g} MB") if key == "memory" \
                else (f"{amount:g}", f"{most:g}")
            where = field_of.get(key, f"ray.resources.{key}")
            out[where] = (f"{shown[0]} of {key!r} requested; no Ray node has that much "
                          f"(the most any has: {shown[1]})")
    for key, value in labels.items():
        if not any(n.get("Labels", {}).get(key) == value for n in alive):
            out[f"ray.node_label.{key}"] = f"no Ray node is labelled {key}={value}"
    return out or {"ray": "no single Ray node has all of it at once (each has only a part)"}


def cluster_capacity(nodes: list[dict[str, Any]]) -> Resources:
    """The sum of the alive nodes' CPUs, memory and GPUs."""
    alive = [n.get("Resources", {}) for n in nodes if n.get("Alive")]
    return Resources(sum(r.get("CPU", 0.0) for r in alive),
                     int(sum(r.get("memory", 0.0) for r in alive) // _MB),
                     int(sum(r.get("GPU", 0.0) for r in alive)))


class RayBackend(Backend):
    name = "ray"
    lends_cores = False  # the pool's free cores are the cluster's, not the learner's node's

    @classmethod
    def from_settings(cls, settings: Settings) -> RayBackend:
        return cls(RayConfig(
            node=settings.node_name, address=settings.ray_address,
            namespace=settings.ray_namespace, functions_dir=settings.functions_dir,
            builtins_dir=settings.ray_builtins_dir, log_dir=settings.state_dir / "logs",
            local_cpu=settings.node_cpu, local_memory_mb=settings.node_memory_mb,
            local_gpus=settings.node_gpus, env_layers_dir=settings.env_layers_folder,
            zygote=settings.zygote))

    def __init__(self, config: RayConfig):
        self.config = config
        self._local: LocalRayCluster | None = None
        address = config.address
        if address is None:
            log_dir = config.log_dir or Path.home() / ".faasrl" / "logs"
            self._local = LocalRayCluster(log_dir / "ray-head.log", cpu=config.local_cpu,
                                          memory_mb=config.local_memory_mb,
                                          gpus=config.local_gpus)
            address = self._local.start()
        # Ray's driver would install absl's failure-signal handler over the process's own,
        # SIGTERM included: a stopping gateway then aborts (exit 134) instead of stopping.
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
        try:
            with loopback_driver() if self._local is not None else contextlib.nullcontext():
                ray.init(address=address, namespace=config.namespace, log_to_driver=False,
                         logging_level=logging.WARNING)
        except Exception:
            if self._local is not None:
                self._local.stop()
            raise
        self._actor_class = ray.remote(RuntimeActor)
        self._owner = owner_label()
        self._handles: dict[str, ContainerHandle] = {}
        self._actors: dict[str, Any] = {}  # container id -> actor handle
        self._exits: dict[str, int] = {}  # container id -> exit status (-1: actor/node died)
        self._stats: dict[str, tuple[float, ContainerStats | None]] = {}
        self._refreshing: set[str] = set()
        self._nodes: list[dict[str, Any]] = ray.nodes()
        self._zygote_class = ray.remote(ZygoteActor) if config.zygote else None  # None: off
        # The nodes' zygote actors (``ray_zygote``), by Ray node id.
        self._zygote_prefix = actor_name(config.node, self._owner, "")
        self._zygotes: dict[str, Any] = {}
        self._place_zygotes()
        # Ray's calls block; kills, log reads and node polls run here, off the event loop.
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="ray")
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll_nodes, name="ray-nodes", daemon=True)
        self._poller.start()

    # ------------------------------------------------------------------ cluster
    def capacity(self) -> Resources:
        return cluster_capacity(self._nodes)

    def _poll_nodes(self) -> None:
        while not self._closing.wait(NODES_POLL_S):
            try:
                self._nodes = ray.nodes()
                self._place_zygotes()
            except Exception as exc:  # the GCS is away: keep the last view, say so once
                if not self._closing.is_set():
                    log.warning("cannot read the Ray cluster's nodes: %s", exc)

    def _place_zygotes(self) -> None:
        """A zygote actor on each alive node that can hold containers and has none of ours;
        the dead nodes' are forgotten (they went with them)."""
        if self._zygote_class is None:
            return
        hosts = {n["NodeID"] for n in self._nodes if n.get("Alive")
                 and n.get("Resources", {}).get("CPU", 0.0) >= PLACEMENT_CPU}
        for node_id in hosts - self._zygotes.keys():
            self._zygotes[node_id] = self._zygote_class.options(
                name=zygote_name(self._zygote_prefix, node_id),
                namespace=self.config.namespace, num_cpus=0, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
        for node_id in self._zygotes.keys() - hosts:
            del self._zygotes[node_id]

    def check(self, spec: FunctionSpec) -> dict[str, str]:
        fields: dict[str, str] = {}
        if spec.image:
            fields["image"] = ("the Ray backend runs no images: the nodes' own Python runs the "
                               "runtime (give the Ray cluster the faasrl runtime image)")
        if not spec.code_sha256 and self._workdir(spec) is None:
            fields["code_dir"] = (
                "Ray nodes cannot see folders of the gateway's host: deploy the folder with "
                "'faasrl functions deploy' (it uploads the code: code_sha256)")
        return {**fields, **node_shortfall(spec, self._nodes)}

    async def layer_store(self) -> LayerStore:
        """A local cluster's workers run on this host, with this interpreter: they read the
        gateway's layers. Other clusters' nodes do not share its disk."""
        if self._local is None or self.config.env_layers_dir is None:
            raise LayerError("requirements.txt: env layers are installed on the gateway's "
                             "host, which the nodes of a Ray cluster of its own "
                             "(FAASRL_RAY_ADDRESS) do not share; use the local cluster, the "
                             "process or the Docker backend, or vendor the packages")
        try:
            target = await asyncio.to_thread(interpreter_target, sys.executable)
        except TargetError as exc:
            raise LayerError(str(exc)) from None
        return LayerStore(self.config.env_layers_dir, target)

    def _workdir(self, spec: FunctionSpec) -> str | None:
        functions = self.config.functions_dir
        return builtin_dir(spec, functions, self.config.builtins_dir or str(functions))

    # --------------------------------------------------------------- lifecycle
    async def start(self, spec: FunctionSpec, container_id: str, gpus: tuple[int, ...] = (),
                    stem: ContainerHandle | None = None) -> ContainerHandle:
        """``gpus`` is ignored: Ray assigns the actor its GPUs on its node. No stem cells here
        (``has_stem_cells`` is False)."""
        if short := node_shortfall(spec, self._nodes):
            raise RuntimeError("no Ray node can hold it: " + "; ".join(
                f"{k}: {v}" for k, v in short.items()))
        name = actor_name(self.config.node, self._owner, container_id)
        actor = self._actor_class.options(
            **actor_options(spec, name, self.config.namespace)).remote(container_id)
        self._actors[container_id] = actor
        try:
            config = {"cpu": spec.cpu, "memory_mb": spec.memory_mb, "gpu": spec.gpu,
                      "workdir": self._workdir(spec), "layers": await self._layers_root(),
                      "zygote": None if self._zygote_class is None else self._zygote_prefix}
            out = json.loads(await _wait(actor.start.remote(json.dumps(config))))
        except BaseException:  # pending past the start timeout, or failed: it must not linger
            self._actors.pop(container_id, None)
            await self._kill(actor)
            raise
        if out["unforked"]:
            log.debug("container %s starts as a new interpreter: %s", container_id,
                      out["unforked"])
        handle = ContainerHandle(container_id, spec.name, self.name, out["host"], out["port"],
                                 pid=out["pid"], native_id=name, secret=out["secret"],
                                 node=out["node_id"])
        self._handles[container_id] = handle
        actor.wait_exit.remote().future().add_done_callback(
            lambda done: self._exited(container_id, done))
        return handle

    async def _layers_root(self) -> str | None:
        try:
            return str((await self.layer_store()).root)
        except LayerError:
            return None

    def _exited(self, container_id: str, done: Future[int]) -> None:
        if container_id not in self._actors:
            return  # stopped by this backend
        try:
            self._exits[container_id] = int(done.result())
        except Exception as exc:  # the actor, its worker or its node died
            log.warning("container %s is lost: %s", container_id,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            self._exits[container_id] = -1

    async def stop(self, handle: ContainerHandle, grace_s: float = 2.0) -> None:
        actor = self._actors.pop(handle.id, None)
        self._handles.pop(handle.id, None)
        self._stats.pop(handle.id, None)
        if actor is None:
            return
        if handle.id not in self._exits:
            try:
                await asyncio.wait_for(_wait(actor.stop.remote(grace_s)), grace_s + 5.0)
            except (RayError, TimeoutError) as exc:
                log.debug("container %s did not stop cleanly: %s", handle.id, exc)
        await self._kill(actor)
        self._exits.pop(handle.id, None)

    async def _close_zygotes(self) -> None:
        """End the nodes' zygotes (they remove their files), then their actors."""
        zygotes, self._zygotes = list(self._zygotes.values()), {}
        with contextlib.suppress(RayError, TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(_wait(z.close.remote()) for z in zygotes),
                                                  return_exceptions=True), 10.0)
        for zygote in zygotes:
            await self._kill(zygote)

    async def _kill(self, actor: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, _kill, actor)

    def exit_code(self, handle: ContainerHandle) -> int | None:
        if handle.id not in self._actors:
            return -1
        return self._exits.get(handle.id)

    def list_own(self) -> list[ContainerHandle]:
        return list(self._handles.values())

    def reap_orphans(self) -> int:
        reaped = 0
        for name in ray.util.list_named_actors():
            node, _, rest = name.partition("/")
            owner, _, _ = rest.rpartition("/")
            if node != self.config.node or owner == self._owner or owner_alive(owner):
                continue
            try:
                _kill(ray.get_actor(name, namespace=self.config.namespace))
                reaped += 1
            except ValueError:
                pass  # gone meanwhile
        return reaped

    # ------------------------------------------------------------ observation
    def stats(self, handle: ContainerHandle) -> ContainerStats | None:
        """The latest sample, refreshed in the background when older than 2 s."""
        taken, sample = self._stats.get(handle.id, (0.0, None))
        actor = self._actors.get(handle.id)
        if time.monotonic() - taken > _STATS_MAX_AGE_S and actor is not None \
                and handle.id not in self._refreshing:
            self._refreshing.add(handle.id)
            actor.stats.remote().future().add_done_callback(
                lambda done: self._sampled(handle.id, done))
        return sample

    def _sampled(self, container_id: str, done: Future[str]) -> None:
        try:
            raw = json.loads(done.result())
            sample = ContainerStats(**raw) if raw else None
        except Exception:
            sample = None
        self._stats[container_id] = (time.monotonic(), sample)
        self._refreshing.discard(container_id)

    def logs(self, handle: ContainerHandle, tail: int = 50) -> str:
        actor = self._actors.get(handle.id)
        if actor is None:
            return ""
        try:
            return str(ray.get(actor.logs.remote(tail), timeout=2.0))
        except Exception:
            return ""

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(h, grace_s=1.0) for h in list(self._handles.values())))
        for actor in list(self._actors.values()):  # still starting
            await self._kill(actor)
        self._actors.clear()
        self._closing.set()
        self._poller.join(timeout=NODES_POLL_S + 5.0)
        await self._close_zygotes()
        self._pool.shutdown(wait=True, cancel_futures=True)
        ray.shutdown()
        if self._local is not None:
            self._local.stop()


async def _wait(ref: Any) -> Any:
    """An ObjectRef's value, awaited without blocking the event loop."""
    return await asyncio.wrap_future(ref.future())


def _kill(actor: Any) -> None:
    with contextlib.suppress(RayError, ValueError):  # gone already
        ray.kill(actor, no_restart=True)
