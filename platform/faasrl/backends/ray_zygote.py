"""The Ray actor that holds one node's zygote, so that a Ray container's cold start forks a
runtime that has imported torch instead of starting a new interpreter, as on the process backend.

The gateway places one per node that can hold containers (``NodeAffinitySchedulingStrategy``,
no resources of its own) and names it ``<node>/<owner>/zygote-<Ray node id>`` (``zygote_name``),
so a container's actor (``ray_actor.RuntimeActor``) finds its node's by name and the gateway's
reaper treats it as any actor of its owner. The actor starts ``faasrl.runtime.zygote`` through
the process backend's client (``backends.zygote_client.ZygoteClient``) with an environment built
afresh (``zygote_env``): neither the raylet's nor the gateway's secrets reach it. The zygote dies
with this actor's worker (its parent-death signal), and every container it forked with it.

A forked container is the zygote's child, so its exit is known here: ``wait_exit`` and ``stop``
are answered here for the container's actor. A container whose actor died without stopping it
(killed while it started) is ended here too: each fork names its actor's process, and a sweep
ends the children of actors that are gone. When the zygote is gone, cannot fork, or the function
is too small to hold a fork of it, ``fork`` says why and the container starts as a new
interpreter; a zygote that died after it had been ready is started again (at most every
``RESPAWN_S``).
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

from faasrl.backends.process import (
    RESPAWN_S,
    ZYGOTE_HEAP_MB,
    ZYGOTE_WAIT_S,
    Forked,
    end_child,
    fits,
    fork_runtime,
    owner_alive,
    zygote_env,
)
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
        # child pid -> the zygote that forked it, and its container actor (``owner_label``)
        self._children: dict[int, tuple[ZygoteClient, str]] = {}
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

    async def fork(self, request: str) -> str:
        """Fork a container's runtime; ``request``: JSON with ``id``, ``env``, ``cwd``,
        ``memory_mb``, ``log``, ``host`` and ``owner`` (its actor's process, ``owner_label``).
        Answers JSON ``{"pid", "port", "secret"}``, or ``{"error"}``: start a new interpreter."""
        req = json.loads(request)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        zygote = self._usable()
        if zygote is None:
            return json.dumps({"error": "the node's zygote is gone"})
        if not zygote.was_ready and fits(zygote, req["memory_mb"]):
            await zygote.settled(ZYGOTE_WAIT_S)  # its imports come sooner than a new one's
        if zygote.failure is not None or not zygote.usable:
            return json.dumps({"error": f"the node's zygote is {zygote.state}"})
        if not fits(zygote, req["memory_mb"]):
            return json.dumps({"error": "too small to hold a fork of the zygote"})
        try:
            pid, port, secret = await fork_runtime(
                zygote, req["id"], req["env"], Path(req["cwd"]), req["memory_mb"],
                Path(req["log"]), host=req["host"])
        except ZygoteGone as exc:
            return json.dumps({"error": str(exc)})
        self._children[pid] = zygote, req["owner"]
        return json.dumps({"pid": pid, "port": port, "secret": secret})

    async def wait_exit(self, pid: int) -> int:
        """Wait for a forked container to exit; its exit status (it is then ended and reaped,
        the rest of its process group with it)."""
        if (child := self._children.get(pid)) is None:
            return -1
        while (code := child[0].exit_code(pid)) is None:
            await asyncio.sleep(EXIT_POLL_S)
        await self.stop(pid, 0.0)
        return code

    async def stop(self, pid: int, grace_s: float) -> None:
        """SIGTERM to a forked container's group, SIGKILL after ``grace_s``; then reap it."""
        if (child := self._children.pop(pid, None)) is not None:
            await end_child(Forked(pid, child[0]), grace_s)

    def state(self) -> str:
        """JSON ``{"state", "pid", "not_preloaded"}`` of the zygote (``ZygoteState``)."""
        zygote = self._zygote
        if zygote is None:
            return json.dumps({"state": "gone", "pid": None, "not_preloaded": {}})
        return json.dumps({"state": zygote.state, "pid": zygote.pid,
                           "not_preloaded": zygote.not_preloaded})

    async def close(self) -> None:
        """End the zygote (and whatever it still holds) and remove its files."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        if (zygote := self._zygote) is not None:
            await zygote.close()
            shutil.rmtree(zygote.cwd, ignore_errors=True)
            self._zygote = None

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            for pid, (_, owner) in list(self._children.items()):
                if not owner_alive(owner):
                    with contextlib.suppress(Exception):
                        await self.stop(pid, 0.0)
