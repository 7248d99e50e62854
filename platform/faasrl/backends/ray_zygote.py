"""The Ray actor that holds one node's zygote, so that a Ray container's cold start forks a
runtime that has imported torch instead of starting a new interpreter, as on the process backend.

The gateway places one per node that can hold containers (``NodeAffinitySchedulingStrategy``,
no resources of its own) and names it ``<node>/<owner>/zygote-<Ray node id>`` (``zygote_name``),
so a container's actor (``ray_actor.RuntimeActor``) finds its node's by name and the gateway's
reaper treats it as any actor of its owner. The actor starts ``faasrl.runtime.zygote`` through
the process backend's client (``backends.zygote_client.ZygoteClient``) with an environment built
afresh (``zygote_env``): neither the raylet's nor the gateway's secrets reach it. The zygote dies
with this actor's worker (its parent-death signal), and every container it forked with it.

Most containers have no actor of their own: the gateway holds their resources in a one-bundle
placement group, which Ray places in milliseconds, and asks the group's node's zygote actor to
``host`` them: set up their files and environment (``ray_node.set_up``) and start the runtime,
then answer ``wait_exit``, ``stop``, ``stats`` and ``logs`` for them. Either the zygote forks
it, or, when the zygote is gone, failed, still importing past ``ZYGOTE_WAIT_S``, or the function
is too small to hold a fork of it, this actor starts it as a new interpreter, its own child;
neither waits for Ray to start a worker. Those that need an actor of their own (a GPU container:
Ray assigns an actor its devices) ask this one to ``fork`` for theirs; where it says why it
cannot, their actor starts a new interpreter. Such a fork names its actor's process: a sweep
ends the children of actors that are gone (killed while they started). A zygote that died after
it had been ready is started again (at most every ``RESPAWN_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faasrl.backends.process import (
    RESPAWN_S,
    ZYGOTE_HEAP_MB,
    ZYGOTE_WAIT_S,
    Exec,
    Forked,
    end_child,
    exec_runtime,
    fits,
    fork_runtime,
    owner_alive,
    zygote_env,
)
from faasrl.backends.ray_node import NodeSetup, log_tail, set_up, stats_json
from faasrl.backends.zygote_client import ZygoteClient, ZygoteGone

SWEEP_S = 1.0  # how often the children of dead container actors are looked for
EXIT_POLL_S = 0.02  # how often ``wait_exit`` looks at a child's exit status
ZYGOTE_PREFIX = "zygote-"


def zygote_name(prefix: str, node_id: str) -> str:
    """The name of the zygote actor of the Ray node ``node_id``; ``prefix``: ``<node>/<owner>/``
    of the gateway that placed it."""
    return f"{prefix}{ZYGOTE_PREFIX}{node_id}"


class ZygoteActor:
    """One node's zygote. Async (its calls wait on the zygote without holding a thread)."""

    def __init__(self) -> None:
        from faasrl.runtime.__main__ import no_peeking

        no_peeking()  # the containers' secrets pass through here
        self._zygote: ZygoteClient | None = None
        self._started = 0.0
        # child pid -> the child (forked by the zygote, or a new interpreter this process
        # started) and its container actor (``owner_label``; None: hosted here)
        self._children: dict[int, tuple[Forked | Exec, str | None]] = {}
        self._setups: dict[int, NodeSetup] = {}  # a hosted container's pid -> its files
        self._sweeper: asyncio.Task[None] | None = None
        self._start()

    def _start(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix="faasrl-zygote-"))
        self._started = time.monotonic()
        try:
            self._zygote = ZygoteClient(sys.executable, zygote_env(tmp, os.geteuid()), tmp,
                                  tmp / "zygote.log", {}, ZYGOTE_HEAP_MB)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    def _usable(self) -> ZygoteClient | None:
        """The zygote, or None (starting a new one if it died after it had been ready)."""
        zygote = self._zygote
        if zygote is not None and zygote.gone and zygote.was_ready \
                and time.monotonic() - self._started >= RESPAWN_S:
            shutil.rmtree(zygote.cwd, ignore_errors=True)
            self._start()
            return None
        return zygote

    async def host(self, container_id: str, config: str) -> str:
        """Set up a container on this node and start its runtime, forked from the zygote or
        else a new interpreter, hosting it here with no actor of its own (the gateway holds its
        resources in a placement group). ``config``: JSON as ``ray_node.set_up`` takes it, and
        ``memory_mb``. Answers JSON ``{"host", "port", "pid", "secret", "node_id",
        "unforked"}`` (why it is a new interpreter; null: forked)."""
        cfg = json.loads(config)
        setup = set_up(container_id, cfg)
        out = await self._fork(container_id, setup.env, setup.cwd, cfg["memory_mb"], setup.log,
                               setup.host, owner=None)
        if "error" in out:  # a new interpreter, still without a Ray worker to start for it
            try:
                proc, port, secret = exec_runtime(sys.executable, setup.env, setup.cwd,
                                                  cfg["memory_mb"], setup.log, host=setup.host)
            except OSError:
                setup.remove()
                raise
            self._children[proc.pid] = Exec(proc), None
            out = {"pid": proc.pid, "port": port, "secret": secret, "unforked": out["error"]}
        self._setups[out["pid"]] = setup
        return json.dumps({"unforked": None, **out, "host": setup.host,
                           "node_id": setup.node_id})

    async def fork(self, request: str) -> str:
        """Fork a container's runtime for its actor; ``request``: JSON with ``id``, ``env``,
        ``cwd``, ``memory_mb``, ``log``, ``host`` and ``owner`` (its actor's process,
        ``owner_label``). Answers JSON ``{"pid", "port", "secret"}``, or ``{"error"}``: start a
        new interpreter."""
        req = json.loads(request)
        return json.dumps(await self._fork(req["id"], req["env"], Path(req["cwd"]),
                                           req["memory_mb"], Path(req["log"]), req["host"],
                                           owner=req["owner"]))

    async def _fork(self, container_id: str, env: dict[str, str], cwd: Path, memory_mb: int,
                    log: Path, host: str, owner: str | None) -> dict[str, Any]:
        """``{"pid", "port", "secret"}`` of a forked runtime, or ``{"error"}``. ``owner``: the
        process of the container's actor, whose death ends it (None: hosted here)."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        zygote = self._usable()
        if zygote is None:
            return {"error": "the node's zygote is gone"}
        if not zygote.was_ready and fits(zygote, memory_mb):
            await zygote.settled(ZYGOTE_WAIT_S)  # its imports come sooner than a new one's
        if zygote.failure is not None or not zygote.usable:
            return {"error": f"the node's zygote is {zygote.state}"}
        if not fits(zygote, memory_mb):
            return {"error": "too small to hold a fork of the zygote"}
        try:
            pid, port, secret = await fork_runtime(zygote, container_id, env, cwd, memory_mb,
                                                   log, host=host)
        except ZygoteGone as exc:
            return {"error": str(exc)}
        self._children[pid] = Forked(pid, zygote), owner
        return {"pid": pid, "port": port, "secret": secret}

    async def wait_exit(self, pid: int) -> int:
        """Wait for a forked container to exit; its exit status (it is then ended and reaped,
        the rest of its process group with it; a hosted one's files stay until ``stop``)."""
        if (child := self._children.get(pid)) is None:
            return -1
        while (code := child[0].exit_code()) is None:
            await asyncio.sleep(EXIT_POLL_S)
        await self._end(pid, 0.0)
        return code

    async def stop(self, pid: int, grace_s: float) -> None:
        """End a forked container (``_end``), and remove a hosted one's files."""
        await self._end(pid, grace_s)
        if (setup := self._setups.pop(pid, None)) is not None:
            setup.remove()

    async def _end(self, pid: int, grace_s: float) -> None:
        """SIGTERM to a forked container's group, SIGKILL after ``grace_s``; then reap it."""
        if (child := self._children.pop(pid, None)) is not None:
            await end_child(child[0], grace_s)

    def stats(self, pid: int) -> str:
        """JSON ``{"memory_mb", "cpu_s"}`` of a hosted container's runtime, or null once it is
        gone."""
        return stats_json(pid if pid in self._children else None)

    def logs(self, pid: int, tail: int) -> str:
        setup = self._setups.get(pid)
        return log_tail(setup.log, tail) if setup is not None else ""

    def state(self) -> str:
        """JSON ``{"state", "pid", "not_preloaded"}`` of the zygote (``ZygoteState``)."""
        zygote = self._zygote
        if zygote is None:
            return json.dumps({"state": "gone", "pid": None, "not_preloaded": {}})
        return json.dumps({"state": zygote.state, "pid": zygote.pid,
                           "not_preloaded": zygote.not_preloaded})

    async def close(self) -> None:
        """End the containers still here, the zygote, and remove their files."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for pid in list(self._children):
            await self.stop(pid, 0.0)
        if (zygote := self._zygote) is not None:
            await zygote.close()
            shutil.rmtree(zygote.cwd, ignore_errors=True)
            self._zygote = None

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            for pid, (_, owner) in list(self._children.items()):
                if owner is not None and not owner_alive(owner):
                    with contextlib.suppress(Exception):
                        await self.stop(pid, 0.0)
