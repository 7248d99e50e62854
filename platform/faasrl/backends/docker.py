"""The Docker backend: every container is a Docker container running ``faasrl.runtime``.

Containers start from the function's image (``faasrl/runtime`` by default, ``faasrl/runtime-gpu``
when given GPUs) with the function's CPU and memory as cgroup limits, a pids limit, a non-root
user, a read-only root with a tmpfs on /tmp, no capabilities, and never the Docker socket. GPUs
come as a device request for the indices the invoker's allocator picked. Containers join one
network, where they reach Redis (the compose network's ``redis``, or the embedded Redis through
``host.docker.internal``), and the invoker reaches each one's runtime at its address there.

Stem cells (``start_stem``): containers of an image started before any function asks for one,
whose runtime imports what functions import (``--stem-cell``) and waits. ``start`` given one
specialises it in place of a new container: the engine's live update sets the function's CPU
and memory limits (CFS quota and period, as ``docker update --cpus`` would, since a container's
``NanoCpus`` cannot be changed once it is running, and the full CPU weight of a function; a
stem cell waits at a quarter of it), a rename gives it the function's name, and ``/init``
brings the rest: the function's folder in the image (``cwd``), its container id and thread
counts (``env``), its code and handler. Where the update fails (the function's memory below
what the cell uses) the cell is removed and a new container started instead. A stem cell's
environment holds only what every function container's does (no function's, no gateway's);
it keeps its ``faasrl.stem_cell`` label, and has no ``faasrl.function`` one (its name says
the function), as labels are fixed at create; the pool gives the container the cell's id, so
``faasrl.container`` holds.

Labels say whose a container is: ``faasrl.node`` (this gateway's node name) and
``faasrl.owner`` (the process that started it, as pid and start time). A gateway that starts
reaps containers of its node whose owner is gone (an earlier run of itself) and never touches
those of other nodes or of a live owner. Exits are learnt from the engine's event stream, so
polling a container's state costs no API call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import secrets
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Mount

from faasrl.backends.base import (
    Backend,
    ContainerHandle,
    ContainerStats,
    builtin_dir,
)
from faasrl.backends.process import owner_alive, owner_label
from faasrl.env_layers import LAYERS_ENV, LAYERS_MOUNT
from faasrl.env_layers.install import LayerError, LayerStore, open_folder
from faasrl.env_layers.target import PROBE, PythonTarget, TargetError
from faasrl.manifest import FunctionSpec
from faasrl.resources import host_cores
from faasrl.runtime.gpu import share_env
from faasrl.runtime.preload import thread_env
from faasrl.runtime.server import SECRET_ENV

if TYPE_CHECKING:
    from faasrl.config import Settings

log = logging.getLogger(__name__)
RUNTIME_PORT = 8080
USER = "10001:10001"  # the image's unprivileged user
HOST_ALIAS = "host.docker.internal"  # the host, from inside a container (host-gateway)
LABEL = "faasrl"
_STATS_MAX_AGE_S = 2.0
CFS_PERIOD_US = 100_000
CPU_SHARES = 1024  # the engine's default weight: a function container's
STEM_CPU_SHARES = 256  # a stem cell's while it waits: its imports yield to running functions


@dataclass(frozen=True)
class DockerConfig:
    """What the backend needs from the platform's settings."""

    node: str
    image: str = "faasrl/runtime:latest"
    gpu_image: str = "faasrl/runtime-gpu:latest"
    network: str = "faasrl"
    functions_dir: Path | None = None  # the gateway's built-in functions
    builtins_dir: str = "/opt/faasrl/functions"  # the same functions inside the images
    pids_limit: int = 1024
    tmpfs_mb: int = 512
    env_layers_dir: Path | None = None  # the gateway's env layers; None: containers get none
    env_layers_source: str | None = None  # the same as the engine finds it (a path or a
    #                                       volume); None: the gateway's own mount of it, or it


def mounted_as(mounts: list[dict[str, Any]], folder: Path) -> str | None:
    """What the engine knows ``folder`` as, from the mounts of the container this process runs
    in (a gateway in a container: the compose cluster's): a volume's name or a host path;
    None where no mount ends at it."""
    for mount in mounts:
        if mount.get("Destination") == str(folder):
            return mount.get("Name") if mount.get("Type") == "volume" else mount.get("Source")
    return None


def layers_options(config: DockerConfig, key: str) -> dict[str, Any]:
    """What gives a container the env layers of its image's Python (``key``: its target's):
    the layers folder, mounted read-only at ``LAYERS_MOUNT`` (a mount of the folder, so layers
    installed after the container started show too), and the path of its target's layers."""
    source = config.env_layers_source or str(config.env_layers_dir)
    kind = "bind" if source.startswith("/") else "volume"
    return {"mounts": [Mount(LAYERS_MOUNT, source, type=kind, read_only=True)],
            "environment": {LAYERS_ENV: f"{LAYERS_MOUNT}/{key}"}}


def image_of(spec: FunctionSpec, gpus: tuple[int, ...], config: DockerConfig) -> str:
    return spec.image or (config.gpu_image if gpus else config.image)


def working_dir(spec: FunctionSpec, config: DockerConfig) -> str | None:
    """Where the runtime imports the handler from inside the container.

    Uploaded code is unpacked by the runtime itself; a built-in function is in the image under
    ``builtins_dir``; otherwise the image's own working directory holds the code.
    """
    return builtin_dir(spec, config.functions_dir, config.builtins_dir)


def container_name(function: str, container_id: str) -> str:
    return f"{LABEL}-{function}-{container_id}"


def function_env(spec: FunctionSpec, container_id: str) -> dict[str, str]:
    """What of a container's environment is its function's (a stem cell gets it at /init)."""
    return {"FAASRL_CONTAINER_ID": container_id, **thread_env(spec.cpu),
            **share_env(spec.gpu, mps=False)}  # MPS would need the daemon's pipes mounted


def _runtime_options(image: str, config: DockerConfig, owner: str, secret: str,
                     memory_mb: int, gpus: tuple[int, ...] = (),
                     layers_key: str | None = None) -> dict[str, Any]:
    """What every container running ``faasrl.runtime`` has, function container or stem cell.
    ``secret``: the runtime's bearer token (it takes it out of its environment before the
    handler loads; only this container's own processes could read it, and they are the
    function). ``layers_key``: the target of the env layers it reads (None: no layers)."""
    options = {
        "image": image,
        "command": ["python", "-m", "faasrl.runtime", "--host", "0.0.0.0",
                    "--port", str(RUNTIME_PORT)],
        "labels": {f"{LABEL}.node": config.node, f"{LABEL}.owner": owner},
        "environment": {
            "PYTHONUNBUFFERED": "1", SECRET_ENV: secret,
            "HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib",
            "XDG_CACHE_HOME": "/tmp/.cache",
            # The NVIDIA runtime exposes exactly these; "void" hides every GPU.
            "NVIDIA_VISIBLE_DEVICES": ",".join(map(str, gpus)) if gpus else "void",
        },
        "user": USER,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={config.tmpfs_mb}m,mode=1777"},
        "mem_limit": f"{memory_mb}m",
        "memswap_limit": f"{memory_mb}m",  # no swap beyond the memory limit
        "pids_limit": config.pids_limit,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,  # a real PID 1, so SIGTERM stops the runtime at once
        "network": config.network,
        "extra_hosts": {HOST_ALIAS: "host-gateway"},
        "detach": True,
    }
    if layers_key is not None:
        layers = layers_options(config, layers_key)
        options["mounts"] = layers["mounts"]
        options["environment"] |= layers["environment"]
    return options


def cpu_limit(spec: FunctionSpec) -> float:
    """A container's CPU limit: its ``cpu``, or where runs may be lent more (``cpu_max``) as
    many of those as this host has (Docker refuses a limit beyond them). The pool keeps what
    it lends within what is free, and the runtime's threads within what it lent."""
    if spec.cpu_max is None:
        return spec.cpu
    return max(spec.cpu, min(spec.cpu_max, host_cores()))


def container_options(spec: FunctionSpec, container_id: str, gpus: tuple[int, ...],
                      config: DockerConfig, owner: str, secret: str,
                      layers_key: str | None = None) -> dict[str, Any]:
    """The keyword arguments of ``containers.run`` for one function container."""
    options = _runtime_options(image_of(spec, gpus, config), config, owner, secret,
                               spec.memory_mb, gpus, layers_key)
    options["name"] = container_name(spec.name, container_id)
    options["labels"] |= {f"{LABEL}.function": spec.name, f"{LABEL}.container": container_id}
    options["environment"] |= function_env(spec, container_id)
    options["nano_cpus"] = int(cpu_limit(spec) * 1e9)
    if gpus:
        options["device_requests"] = [
            DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])]
    if (workdir := working_dir(spec, config)) is not None:
        options["working_dir"] = workdir
    return options


def stem_options(image: str, stem_id: str, config: DockerConfig, owner: str, secret: str,
                 memory_mb: int, layers_key: str | None = None) -> dict[str, Any]:
    """The keyword arguments of ``containers.run`` for a stem cell of ``image``: one core
    at a low weight and ``memory_mb`` while it imports and waits; one thread each for the
    numeric libraries until its function gives it its count."""
    options = _runtime_options(image, config, owner, secret, memory_mb, (), layers_key)
    options["command"].append("--stem-cell")
    options["name"] = container_name("stem", stem_id)
    options["labels"] |= {f"{LABEL}.stem_cell": "true", f"{LABEL}.container": stem_id}
    options["environment"] |= thread_env(1)
    options |= {"cpu_period": CFS_PERIOD_US, "cpu_quota": CFS_PERIOD_US,
                "cpu_shares": STEM_CPU_SHARES}
    return options


def host_gateway_address(client: docker.DockerClient | None = None) -> str:
    """The host's address on Docker's default bridge: what ``host-gateway`` resolves to."""
    own = client is None
    client = client or docker.from_env()
    try:
        config = client.api.inspect_network("bridge")["IPAM"]["Config"][0]
    finally:
        if own:
            client.close()
    # The engine lists no gateway when it picked the subnet itself: then it is the first host.
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


class DockerBackend(Backend):
    name = "docker"
    has_stem_cells = True

    @classmethod
    def from_settings(cls, settings: Settings) -> DockerBackend:
        return cls(DockerConfig(
            node=settings.node_name, image=settings.docker_image,
            gpu_image=settings.docker_gpu_image, network=settings.docker_network,
            functions_dir=settings.functions_dir, builtins_dir=settings.docker_builtins_dir,
            pids_limit=settings.docker_pids_limit, tmpfs_mb=settings.docker_tmpfs_mb,
            env_layers_dir=settings.env_layers_folder,
            env_layers_source=settings.docker_env_layers_source))

    def __init__(self, config: DockerConfig, client: docker.DockerClient | None = None):
        self.config = config
        try:
            self._client = client or docker.from_env()
            self._client.ping()
        except DockerException as exc:
            raise RuntimeError(f"the Docker backend needs a Docker engine, and none answers "
                               f"({exc}); start one with 'make docker-engine'") from None
        self._owner = owner_label()
        self._handles: dict[str, ContainerHandle] = {}
        self._exits: dict[str, int] = {}  # Docker id -> exit code, from the event stream
        self._stats: dict[str, tuple[float, ContainerStats | None]] = {}
        self._refreshing: set[str] = set()
        # The SDK blocks; starts and stops run here so that a burst of them overlaps.
        self._pool = ThreadPoolExecutor(16, thread_name_prefix="docker")
        self._network_ready = False
        self._network_lock = threading.Lock()
        self._closing = False
        self._layers: LayerStore | None = None  # asked of the image at the first need
        self._layers_lock = threading.Lock()
        self._layers_unseen: str | None = None  # why containers could not see the layers
        if config.env_layers_dir is not None:
            open_folder(config.env_layers_dir)  # the mount's root: passed by the functions
            if config.env_layers_source is None and (mounts := self._own_mounts()) is not None:
                if (source := mounted_as(mounts, config.env_layers_dir)) is not None:
                    self.config = config = dataclasses.replace(config, env_layers_source=source)
                else:
                    self._layers_unseen = (
                        f"requirements.txt: the gateway runs in a container, where "
                        f"{config.env_layers_dir} is no mount of its own, so function "
                        "containers cannot see its env layers; mount a volume there (as "
                        "docker-compose.yml does) or set FAASRL_DOCKER_ENV_LAYERS_SOURCE")
                    log.warning("%s", self._layers_unseen)
        self._events = self._client.events(decode=True, filters={
            "type": "container", "event": "die", "label": f"{LABEL}.owner={self._owner}"})
        self._watcher = threading.Thread(target=self._watch, name="docker-events", daemon=True)
        self._watcher.start()

    # ------------------------------------------------------------------ checks
    def check(self, spec: FunctionSpec) -> dict[str, str]:
        fields: dict[str, str] = {}
        if not spec.code_sha256 and not spec.image and working_dir(spec, self.config) is None:
            fields["code_dir"] = (
                "a Docker container cannot see folders of the gateway's host: deploy the folder "
                "with 'faasrl functions deploy' (it uploads the code: code_sha256) or give an "
                "image that holds the handler")
        image = spec.image or self.config.image
        try:
            self._client.images.get(image)
        except ImageNotFound:
            fields["image"] = f"no image {image!r} on this Docker engine (make images)"
        return fields

    # -------------------------------------------------------------- env layers
    def _own_mounts(self) -> list[dict[str, Any]] | None:
        """The mounts of the container of this engine that this gateway runs in; None where
        it runs on the engine's host (or in a container of another engine)."""
        if not Path("/.dockerenv").exists():
            return None
        try:
            me = self._client.containers.get(socket.gethostname())
        except DockerException:
            return None
        if me.attrs.get("Config", {}).get("Hostname") != socket.gethostname():
            return None  # a container whose id begins as this host's name does
        return me.attrs.get("Mounts") or []

    async def layer_store(self) -> LayerStore:
        """Layers for the Python of the default image (the GPU image is built on the same
        base; an image of a function's own with another Python cannot use them)."""
        if self.config.env_layers_dir is None:
            return await super().layer_store()
        if self._layers_unseen is not None:
            raise LayerError(self._layers_unseen)
        try:
            return await self._call(self._layer_store)
        except (DockerException, TargetError) as exc:
            raise LayerError(f"cannot ask the image {self.config.image!r} which Python it "
                             f"runs: {exc}") from None

    def _layer_store(self) -> LayerStore:
        folder = self.config.env_layers_dir
        assert folder is not None
        with self._layers_lock:
            if self._layers is None:
                self._layers = LayerStore(folder, self._image_target(folder))
            return self._layers

    def _image_target(self, folder: Path) -> PythonTarget:
        """The default image's Python, asked of a throwaway container of it once per image
        (about a second) and kept beside the layers by image id."""
        image_id = self._client.images.get(self.config.image).id.split(":")[-1]
        known = folder / ".targets" / f"{image_id}.json"
        with contextlib.suppress(OSError, TargetError):
            return PythonTarget.from_probe(known.read_text())
        out = self._client.containers.run(
            image_id, ["python", "-c", PROBE], remove=True, user=USER, network_mode="none",
            read_only=True, stdout=True, stderr=False).decode()
        target = PythonTarget.from_probe(out)
        known.parent.mkdir(exist_ok=True)
        partial = known.with_suffix(f".{secrets.token_hex(4)}")
        partial.write_text(out)
        partial.replace(known)
        return target

    async def _layers_key(self) -> str | None:
        """The target key containers' env layers are installed for (None: no layers)."""
        try:
            return (await self.layer_store()).target.key
        except LayerError as exc:
            if self.config.env_layers_dir is not None:
                log.warning("containers start without env layers: %s", exc)
            return None

    # --------------------------------------------------------------- lifecycle
    async def start(self, spec: FunctionSpec, container_id: str, gpus: tuple[int, ...] = (),
                    stem: ContainerHandle | None = None) -> ContainerHandle:
        if stem is not None and not gpus:
            try:
                return await self._specialise(stem, spec, container_id)
            except (DockerException, OSError) as exc:
                log.info("stem cell %s not used for %r (%s): starting a new container",
                         stem.id, spec.name, exc)
        if stem is not None:
            await self.stop(stem, 0.0)
        secret = secrets.token_urlsafe(32)
        options = container_options(spec, container_id, gpus, self.config, self._owner, secret,
                                    await self._layers_key())
        container = await self._call(self._run, options)
        handle = ContainerHandle(container_id, spec.name, self.name, self._address(container),
                                 RUNTIME_PORT, native_id=container.id, secret=secret)
        self._handles[container_id] = handle
        return handle

    async def start_stem(self, image: str, stem_id: str, memory_mb: int) -> ContainerHandle:
        secret = secrets.token_urlsafe(32)
        options = stem_options(image or self.config.image, stem_id, self.config, self._owner,
                               secret, memory_mb, await self._layers_key())
        container = await self._call(self._run, options)
        handle = ContainerHandle(stem_id, "", self.name, self._address(container),
                                 RUNTIME_PORT, native_id=container.id, secret=secret,
                                 stem_cell=True)
        self._handles[stem_id] = handle
        return handle

    async def _specialise(self, stem: ContainerHandle, spec: FunctionSpec,
                          container_id: str) -> ContainerHandle:
        """The stem cell, made this function's container (see the module docstring)."""
        if self._handles.get(stem.id) is not stem or stem.native_id in self._exits:
            raise DockerException("the stem cell is gone")
        await self._call(self._update, stem.native_id, spec, container_id)
        del self._handles[stem.id]
        init: dict[str, Any] = {"env": function_env(spec, container_id)}
        if (workdir := working_dir(spec, self.config)) is not None:
            init["cwd"] = workdir
        handle = ContainerHandle(container_id, spec.name, self.name, stem.host, stem.port,
                                 native_id=stem.native_id, secret=stem.secret, stem_cell=True,
                                 init=init)
        self._handles[container_id] = handle
        return handle

    def _update(self, native_id: str, spec: FunctionSpec, container_id: str) -> None:
        self._client.api.update_container(
            native_id, cpu_period=CFS_PERIOD_US, cpu_quota=int(cpu_limit(spec) * CFS_PERIOD_US),
            cpu_shares=CPU_SHARES, mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m")
        self._client.api.rename(native_id, container_name(spec.name, container_id))

    def _run(self, options: dict[str, Any]) -> Any:
        self._ensure_network()
        try:
            container = self._client.containers.run(**options)
        except ImageNotFound:
            raise RuntimeError(f"no image {options['image']!r} on this Docker engine; build it "
                               "with 'make images'") from None
        container.reload()
        return container

    def _ensure_network(self) -> None:
        if self._network_ready:
            return
        with self._network_lock:  # starts run in threads: the first makes it
            if self._network_ready:
                return
            if not self._networks():
                try:
                    self._client.networks.create(self.config.network, driver="bridge",
                                                 labels={f"{LABEL}.network": "true"},
                                                 check_duplicate=True)
                except APIError as exc:  # made by someone else meanwhile
                    if exc.status_code != 409:
                        raise
            self._one_network()
            self._network_ready = True

    def _networks(self) -> list[Any]:
        """The engine's networks of our network's name (its filter also matches parts)."""
        return [n for n in self._client.networks.list(names=[self.config.network])
                if n.name == self.config.network]

    def _one_network(self) -> None:
        """Keep one network of the name. The engine's duplicate check is not atomic: gateways
        starting at once may each make one, and every later start then fails as "ambiguous".
        Each keeps the first made and removes the others (one in use stays: the engine
        refuses)."""
        made = sorted(self._networks(), key=lambda n: (n.attrs.get("Created", ""), n.id))
        for extra in made[1:]:
            with contextlib.suppress(APIError):
                extra.remove()
            log.warning("removed a second Docker network %r (%s) made by a racing start",
                        self.config.network, extra.short_id)

    def _address(self, container: Any) -> str:
        networks = container.attrs["NetworkSettings"]["Networks"]
        return networks[self.config.network]["IPAddress"]

    async def stop(self, handle: ContainerHandle, grace_s: float = 2.0) -> None:
        if self._handles.pop(handle.id, None) is None or handle.native_id is None:
            return
        await self._call(self._remove, handle.native_id, grace_s)
        self._stats.pop(handle.native_id, None)

    def _remove(self, native_id: str, grace_s: float) -> None:
        try:
            container = self._client.containers.get(native_id)
            if grace_s > 0 and native_id not in self._exits:
                container.stop(timeout=max(1, round(grace_s)))
            container.remove(force=True)
        except NotFound:
            pass
        finally:
            self._exits.pop(native_id, None)

    def exit_code(self, handle: ContainerHandle) -> int | None:
        if handle.id not in self._handles:
            return -1
        return self._exits.get(handle.native_id or "")

    def _watch(self) -> None:
        try:
            for event in self._events:
                attrs = event.get("Actor", {}).get("Attributes", {})
                self._exits[event["id"]] = int(attrs.get("exitCode", -1))
        except (DockerException, OSError, ValueError) as exc:
            if not self._closing:
                log.warning("the Docker event stream broke (%s): a container's exit is now "
                            "noticed only when a request to it fails", exc)

    def list_own(self) -> list[ContainerHandle]:
        return list(self._handles.values())

    def reap_orphans(self) -> int:
        reaped = 0
        for container in self._client.containers.list(
                all=True, filters={"label": f"{LABEL}.node={self.config.node}"}):
            owner = container.labels.get(f"{LABEL}.owner", "")
            if owner == self._owner or owner_alive(owner):
                continue
            try:
                container.remove(force=True)
                reaped += 1
            except NotFound:
                pass
        return reaped

    # ------------------------------------------------------------ observation
    def stats(self, handle: ContainerHandle) -> ContainerStats | None:
        """The latest sample, refreshed in the background when older than 2 s (a Docker stats
        call takes tens of ms: too slow to make on the gateway's event loop)."""
        key = handle.native_id or ""
        taken, sample = self._stats.get(key, (0.0, None))
        if time.monotonic() - taken > _STATS_MAX_AGE_S and key not in self._refreshing \
                and handle.id in self._handles:
            self._refreshing.add(key)
            self._pool.submit(self._sample, key)
        return sample

    def _sample(self, native_id: str) -> None:
        try:
            raw = self._client.api.stats(native_id, stream=False, one_shot=True)
            mem = raw.get("memory_stats", {})
            detail = mem.get("stats", {})
            used = mem.get("usage", 0) - detail.get("cache", detail.get("inactive_file", 0))
            cpu_ns = raw.get("cpu_stats", {}).get("cpu_usage", {}).get("total_usage", 0)
            self._stats[native_id] = (time.monotonic(),
                                      ContainerStats(memory_mb=max(used, 0) / 2**20,
                                                     cpu_s=cpu_ns / 1e9))
        except (DockerException, OSError, ValueError):
            self._stats[native_id] = (time.monotonic(), None)
        finally:
            self._refreshing.discard(native_id)

    def logs(self, handle: ContainerHandle, tail: int = 50) -> str:
        try:
            out = self._client.containers.get(handle.native_id).logs(tail=tail)
        except (DockerException, OSError):
            return ""
        return out.decode(errors="replace")

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(h, grace_s=1.0) for h in list(self._handles.values())))
        self._closing = True
        self._events.close()
        # A start whose caller was cancelled (a stem cell started in the background, when the
        # platform stops) still makes its container: wait for those, then remove whatever of
        # this node and owner is left (not another node's: one process may run two gateways).
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: self._pool.shutdown(wait=True, cancel_futures=True))
        await asyncio.get_running_loop().run_in_executor(None, self._remove_leftovers)
        self._client.close()

    def _remove_leftovers(self) -> None:
        try:
            for container in self._client.containers.list(all=True, filters={"label": [
                    f"{LABEL}.node={self.config.node}", f"{LABEL}.owner={self._owner}"]}):
                with contextlib.suppress(NotFound):
                    container.remove(force=True)
        except (DockerException, OSError) as exc:
            log.warning("could not remove this gateway's last containers: %s", exc)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
