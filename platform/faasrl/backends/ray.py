"""The Ray backend: every container runs ``faasrl.runtime`` on a Ray node, hosted by that node's
zygote actor or by an actor of its own.

Ray holds what a container needs on its node for its life, as the pool holds it: its
``memory_mb`` as ``memory``, ``gpu`` as ``num_gpus`` and the manifest's ``ray`` section (custom
resources, node labels). Cores are not held: a container reserves only ``PLACEMENT_CPU`` of
Ray's CPU (enough to keep it off nodes with no cores), and the pool counts a container's ``cpu``
while it starts or runs, as on one machine. Ray would hold ``num_cpus`` until the container
ended, so a job whose functions together ask more cores than the cluster has (2 actors and a
learner on 2 cores) would lose its idle learner to eviction every round.

Cold starts: with ``zygote`` on, the backend places a zygote actor (``ray_zygote``) on every
node that can hold containers, as nodes join (the poll below). A container then has no actor of
its own (``hosted_by_zygote``): a one-bundle placement group holds its resources (Ray places it
in milliseconds, spreading groups over the nodes), and the zygote actor of the node it lands on
hosts it, forked from the node's zygote or, when that cannot be, a new interpreter of its own.
Nothing waits for Ray to start a worker process, which is most of an actor's start. A GPU
container (Ray assigns GPUs to actors), one whose manifest asks to PACK (an actor's strategy),
or any with zygotes off or none on its node yet, gets an actor (``ray_actor.RuntimeActor``),
placed with the options of ``actor_options``; that actor asks its node's zygote actor to fork
the runtime, or starts it as its own child. A zygote actor holds no resources; it goes with its
node, and with the gateway as the containers do. One that dies while its node lives is placed
again at the next poll (its containers are lost with it; until then, new ones get actors).

The host says where the runtime listens; from then on the invoker speaks ``/init`` and ``/run``
to it over HTTP as to any container, and uploaded code arrives
through ``/init`` (``code_sha256``), as in Docker: nodes share no filesystem with the gateway.
Built-in functions are on every node (the runtime image, or this checkout on a local cluster).

The node's capacity is the cluster's: the sum of its alive nodes, polled once a second, so it
follows nodes joining and leaving. A function that fits no single node is refused at deploy
(422), at a job's submit (422) and at start, never left pending.

Containers' actors and placement groups are named ``<node>/<owner>/<container id>`` in one
namespace (``faasrl``): ``node`` is this gateway's ``node_name`` and ``owner`` its process (pid
and start time). Neither is detached, so Ray removes them with the gateway that made them; a
gateway that starts kills any actor of its node's whose owner is gone, and never touches other
nodes' or a live owner's. A container whose host (its actor, or its node's zygote actor) or node
dies is seen from Ray's own state: the host's ``wait_exit`` call fails.
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
from ray.exceptions import RayActorError, RayError
from ray.util.placement_group import (
    PlacementGroup,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats, builtin_dir
from faasrl.backends.process import ZYGOTE_WAIT_S, owner_alive, owner_label
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


def hosted_by_zygote(spec: FunctionSpec) -> bool:
    """Whether a container of ``spec`` can do without an actor of its own, its node's zygote
    actor hosting it (with zygotes on): not a GPU one (Ray assigns devices to actors only), nor
    one whose manifest asks to PACK (an actor's strategy; a placement group places itself)."""
    return spec.gpu == 0 and (spec.ray is None or spec.ray.strategy == "SPREAD")


def host_bundle(spec: FunctionSpec) -> dict[str, float]:
    """What the placement group of a container its zygote actor hosts holds: what
    ``actor_options`` has Ray reserve for an actor."""
    custom = dict(spec.ray.resources) if spec.ray else {}
    return {"CPU": PLACEMENT_CPU, "memory": float(spec.memory_mb * _MB), **custom}


@dataclass(frozen=True)
class Hosted:
    """A container its node's zygote actor hosts (``ZygoteActor.host``): a fork with no actor
    of its own, its resources held in Ray by a one-bundle placement group."""

    zygote: Any  # the node's zygote actor
    pid: int
    group: PlacementGroup


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
        self._hosted: dict[str, Hosted] = {}  # container id -> its zygote actor's fork
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
            self._zygotes.pop(node_id, None)

    def _forget_zygote(self, zygote: Any) -> None:
        """A zygote actor died (its node did not): the next poll of the nodes places another,
        so that the node's containers fork again rather than each get an actor of its own."""
        for node_id, placed in list(self._zygotes.items()):
            if placed is zygote and self._zygotes.pop(node_id, None) is not None:
                log.warning("the zygote actor on the Ray node %s died: placing another",
                            node_id)

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
        config = {"cpu": spec.cpu, "memory_mb": spec.memory_mb, "gpu": spec.gpu,
                  "workdir": self._workdir(spec), "layers": await self._layers_root()}
        if self._zygote_class is not None and hosted_by_zygote(spec) \
                and (hosted := await self._host(spec, container_id, config)) is not None:
            return hosted
        name = actor_name(self.config.node, self._owner, container_id)
        actor = self._actor_class.options(
            **actor_options(spec, name, self.config.namespace)).remote(container_id)
        self._actors[container_id] = actor
        try:
            config["zygote"] = None if self._zygote_class is None else self._zygote_prefix
            out = json.loads(await _wait(actor.start.remote(json.dumps(config))))
        except BaseException:  # pending past the start timeout, or failed: it must not linger
            self._actors.pop(container_id, None)
            await self._kill(actor)
            raise
        _say_unforked(container_id, out["unforked"])
        handle = ContainerHandle(container_id, spec.name, self.name, out["host"], out["port"],
                                 pid=out["pid"], native_id=name, secret=out["secret"],
                                 node=out["node_id"])
        self._handles[container_id] = handle
        actor.wait_exit.remote().future().add_done_callback(
            lambda done: self._exited(container_id, done))
        return handle

    async def _host(self, spec: FunctionSpec, container_id: str, config: dict[str, Any]
                    ) -> ContainerHandle | None:
        """Start the container on the zygote actor of the node where Ray places its placement
        group: a cold start without a Ray worker to start. None: it cannot be (no zygote on that
        node, or it cannot fork this function); the caller starts an actor instead."""
        labels = dict(spec.ray.node_label) if spec.ray and spec.ray.node_label else None
        name = actor_name(self.config.node, self._owner, container_id)
        group = placement_group([host_bundle(spec)], strategy="STRICT_PACK", name=name,
                                bundle_label_selector=[labels] if labels else None)
        zygote, answer = None, None
        try:
            await _wait(group.ready())
            node_id = placement_group_table(group)["bundles_to_node_id"][0]
            if (zygote := self._zygotes.get(node_id)) is None:
                out = {"error": f"no zygote actor on the Ray node {node_id} yet"}
            else:
                answer = zygote.host.remote(container_id, json.dumps(config))
                out = json.loads(await _wait(answer))
        except RayError as exc:  # the zygote actor died, or the setup failed
            if isinstance(exc, RayActorError):
                self._forget_zygote(zygote)
            out = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
        except BaseException:  # pending past the start timeout: undo whatever comes of it
            self._pool.submit(_undo_host, group, zygote, answer)
            raise
        if "error" in out:
            log.debug("container %s gets an actor of its own: %s", container_id, out["error"])
            self._pool.submit(_undo_host, group, None, None)
            return None
        _say_unforked(container_id, out["unforked"])
        self._hosted[container_id] = Hosted(zygote, out["pid"], group)
        handle = ContainerHandle(container_id, spec.name, self.name, out["host"], out["port"],
                                 pid=out["pid"], native_id=name, secret=out["secret"],
                                 node=out["node_id"])
        self._handles[container_id] = handle
        zygote.wait_exit.remote(out["pid"]).future().add_done_callback(
            lambda done: self._exited(container_id, done))
        return handle

    async def _layers_root(self) -> str | None:
        try:
            return str((await self.layer_store()).root)
        except LayerError:
            return None

    def _exited(self, container_id: str, done: Future[int]) -> None:
        if container_id not in self._actors and container_id not in self._hosted:
            return  # stopped by this backend
        try:
            self._exits[container_id] = int(done.result())
        except Exception as exc:  # the actor, its worker or its node died
            log.warning("container %s is lost: %s", container_id,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            self._exits[container_id] = -1
            if isinstance(exc, RayActorError) and (hosted := self._hosted.get(container_id)):
                self._forget_zygote(hosted.zygote)

    async def stop(self, handle: ContainerHandle, grace_s: float = 2.0) -> None:
        actor = self._actors.pop(handle.id, None)
        hosted = self._hosted.pop(handle.id, None)
        self._handles.pop(handle.id, None)
        self._stats.pop(handle.id, None)
        if hosted is not None:  # its files go with it, exited or not
            try:
                await asyncio.wait_for(_wait(hosted.zygote.stop.remote(hosted.pid, grace_s)),
                                       grace_s + 5.0)
            except (RayError, TimeoutError) as exc:  # its node is gone, and it with it
                log.debug("container %s did not stop cleanly: %s", handle.id, exc)
            await asyncio.get_running_loop().run_in_executor(self._pool, _remove, hosted.group)
            self._exits.pop(handle.id, None)
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
        if handle.id not in self._actors and handle.id not in self._hosted:
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
        if time.monotonic() - taken > _STATS_MAX_AGE_S and handle.id not in self._refreshing \
                and (ref := self._ask(handle.id, "stats")) is not None:
            self._refreshing.add(handle.id)
            ref.future().add_done_callback(lambda done: self._sampled(handle.id, done))
        return sample

    def _ask(self, container_id: str, method: str, *args: Any) -> Any:
        """The ObjectRef of ``method`` (``stats``, ``logs``) asked of whoever hosts the
        container: its actor, or its node's zygote actor (for its pid); None: neither."""
        if (actor := self._actors.get(container_id)) is not None:
            return getattr(actor, method).remote(*args)
        if (hosted := self._hosted.get(container_id)) is not None:
            return getattr(hosted.zygote, method).remote(hosted.pid, *args)
        return None

    def _sampled(self, container_id: str, done: Future[str]) -> None:
        try:
            raw = json.loads(done.result())
            sample = ContainerStats(**raw) if raw else None
        except Exception:
            sample = None
        self._stats[container_id] = (time.monotonic(), sample)
        self._refreshing.discard(container_id)

    def logs(self, handle: ContainerHandle, tail: int = 50) -> str:
        if (ref := self._ask(handle.id, "logs", tail)) is None:
            return ""
        try:
            return str(ray.get(ref, timeout=2.0))
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


def _say_unforked(container_id: str, why: str | None) -> None:
    if why:
        log.debug("container %s starts as a new interpreter: %s", container_id, why)


def _remove(group: PlacementGroup) -> None:
    with contextlib.suppress(Exception):  # gone already, or with the cluster
        remove_placement_group(group)


def _undo_host(group: PlacementGroup, zygote: Any, answer: Any) -> None:
    """A hosted start that will not be used: stop the fork it may still make, free its
    group (runs on the backend's threads)."""
    if answer is not None:
        with contextlib.suppress(Exception):
            out = json.loads(ray.get(answer, timeout=ZYGOTE_WAIT_S + 60.0))
            if "pid" in out:
                ray.get(zygote.stop.remote(out["pid"], 0.0), timeout=10.0)
    _remove(group)


def _kill(actor: Any) -> None:
    with contextlib.suppress(RayError, ValueError):  # gone already
        ray.kill(actor, no_restart=True)
