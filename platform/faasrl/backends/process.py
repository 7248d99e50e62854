"""The process backend: every container is a local subprocess running ``faasrl.runtime``.

Each container gets its own session (so its whole process group can be signalled), a listening
socket bound here and inherited by the child (no race for a free port), a heap limit
(``RLIMIT_DATA``), and a parent-death signal so that a crashed platform leaves nothing behind.
Its pid and start time are recorded in the state dir; a platform that starts after a crash of
another reaps what that one left, and never touches a process whose start time does not match
(a recycled pid).

What a function can see: an allow-listed environment (``PASSED_ENV`` and what the runtime needs;
never the gateway's token, keys or credentials), a private temporary folder as ``HOME`` and
``TMPDIR``, ``USER`` and ``LOGNAME`` naming its user (``user_env``), and its runtime's secret only
on an inherited pipe. A gateway running as root runs
functions as an unprivileged user (``function_user``, 10001 by default, as in the Docker
backend), who cannot read the state dir (mode 0700: logs, the token, Redis's data) — provided
that user can run the interpreter; where it cannot (a Python under /root), functions run as root
and the gateway says so at start.

Cold starts: with ``zygote`` on, the backend starts a zygote (``faasrl.runtime.zygote``, with
its interpreter and user) in the background, which imports what the built-in functions import
(torch, gymnasium, ...) up front; when it is ready, a container is forked from it instead of
started as a new interpreter, and becomes in the fork what the new interpreter would have been
(see ``runtime/zygote.py``). A
forked container inherits the zygote's heap, which counts against its ``RLIMIT_DATA`` as a torch
function's own imports would; functions whose ``memory_mb`` leaves less than
``FORK_HEADROOM_MB`` beyond it are started as new interpreters. A function big enough to be
forked (by the same rule, with the heap taken as ``ZYGOTE_HEAP_MB`` until the zygote says)
waits for a zygote that is still importing (up to
``ZYGOTE_WAIT_S``): as a new interpreter it would import the same on the same cores; a smaller
one starts at once. Whenever the zygote is gone or does not answer, a container starts the old
way; a zygote that died after it had been ready is started again (at most every
``RESPAWN_S``). A zygote whose imports left it unfit to fork (a failed import that left modules
half-imported, which a forked container would import again and fail on) says so and exits: its
state is ``failed``, containers start as new interpreters, and none is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faasrl
from faasrl.backends.base import (
    Backend,
    ContainerHandle,
    ContainerStats,
    ZygoteState,
)
from faasrl.backends.zygote_client import ZygoteClient, ZygoteGone
from faasrl.env_layers import LAYERS_ENV
from faasrl.env_layers.install import LayerError, LayerStore, open_folder
from faasrl.env_layers.target import PythonTarget, TargetError, interpreter_target
from faasrl.manifest import FunctionSpec
from faasrl.runtime.gpu import share_env
from faasrl.runtime.preload import thread_env
from faasrl.runtime.zygote import exited

if TYPE_CHECKING:
    from faasrl.config import Settings

log = logging.getLogger(__name__)
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PLATFORM_DIR = str(Path(faasrl.__file__).resolve().parents[1])
# What a function inherits of the gateway's environment; everything else it must be given
# (its manifest's ``env``), so the gateway's secrets never reach it.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH")
FORK_HEADROOM_MB = 256  # of its own heap, beyond the zygote's, a forked container must have
RESPAWN_S = 10.0  # at most one new zygote this often
ZYGOTE_WAIT_S = 30.0  # a start waits this long for a zygote still importing, then execs
ZYGOTE_HEAP_MB = 320  # what a zygote's heap reaches with its imports (271 MB with torch 2.13)
# The user name of a function uid that has no passwd entry here: the runtime image's user
# (images/runtime/Dockerfile), which the default function_user 10001 is.
FUNCTION_USER_NAME = "faasrl"


def process_start_time(pid: int) -> int | None:
    """The start time of a process in clock ticks since boot (with the pid, its identity)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def process_stats(pid: int) -> ContainerStats | None:
    """A process's resident memory and CPU time, None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rss_kb = next((int(line.split()[1]) for line in status.splitlines()
                   if line.startswith("VmRSS:")), 0)
    fields = stat[stat.rindex(b")") + 2:].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return ContainerStats(memory_mb=rss_kb / 1024, cpu_s=cpu_s)


def is_alive(pid: int, start_time: int | None) -> bool:
    """Whether the process that had this pid and start time still runs."""
    return start_time is not None and process_start_time(pid) == start_time


def owner_label() -> str:
    """This process as ``pid:start time``: with the node name, enough to tell it is gone (a
    Docker container's ``faasrl.owner`` label, a Ray actor's name)."""
    return f"{os.getpid()}:{process_start_time(os.getpid())}"


def owner_alive(label: str) -> bool:
    """Whether the process an owner label names still runs (in our pid namespace)."""
    pid, _, start = label.partition(":")
    try:
        return is_alive(int(pid), int(start))
    except ValueError:
        return False


def base_env() -> dict[str, str]:
    """What every function process starts with: a few of this process's variables (never its
    secrets) and faasrl's own folder on the path."""
    passed = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    rest = [p for p in passed.get("PYTHONPATH", "").split(os.pathsep) if p and p != _PLATFORM_DIR]
    passed["PYTHONPATH"] = os.pathsep.join([_PLATFORM_DIR, *rest])
    return {**passed, "PYTHONUNBUFFERED": "1"}


def user_env(uid: int) -> dict[str, str]:
    """``USER`` and ``LOGNAME`` of a function process running as ``uid``: its passwd name, else
    ``FUNCTION_USER_NAME``. ``getpass.getuser()`` reads them first and otherwise fails on a uid
    without a passwd entry (a root gateway's functions as 10001 on a plain host), and libraries
    call it (torch's compile cache folder: every learner's first update failed so)."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = FUNCTION_USER_NAME
    return {"USER": name, "LOGNAME": name}


def reachable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether ``uid`` (group ``gid``, no others) may list ``path`` and pass every folder above
    it, by their modes (folders not made yet count as the 0755 they would be made with)."""
    if uid == 0:
        return True
    for folder in (path, *path.parents):
        try:
            st = folder.stat()
        except FileNotFoundError:
            continue
        except OSError:
            return False
        mode = st.st_mode >> 6 if st.st_uid == uid else \
            st.st_mode >> 3 if st.st_gid == gid else st.st_mode
        need = 0o5 if folder == path else 0o1  # read and pass the layers, pass the rest
        if mode & need != need:
            return False
    return True


def env_layers_folder(preferred: Path, credentials: tuple[int, int] | None) -> Path:
    """Where env layers go so that function processes can read them: ``preferred``, or where
    the functions' user cannot pass a folder above it (a root gateway's state dir under
    /root), a folder of the gateway's own in the temporary folder (``claim_folder``)."""
    if credentials is None or reachable_by(preferred, *credentials):
        return preferred
    return Path(tempfile.gettempdir()) / f"faasrl-env-layers-{os.geteuid()}"


def claim_folder(folder: Path, preferred: Path) -> Path:
    """Make the env layers folder, when it is first needed; one in the temporary folder must
    be the gateway's own (not one another user made there first)."""
    if folder == preferred:
        return open_folder(folder)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o755)
    st = folder.lstat()
    if folder.is_symlink() or not folder.is_dir() or st.st_uid != os.geteuid() \
            or st.st_mode & 0o022:
        raise LayerError(f"{folder} is not the gateway's own folder: env layers cannot go "
                         "there; set FAASRL_ENV_LAYERS_DIR to a folder the function user "
                         "can read")
    log.info("env layers go to %s: the function user cannot reach %s", folder, preferred)
    return open_folder(folder)


def function_credentials(user: str, python: str) -> tuple[int, int] | None:
    """(uid, gid) function processes run as; None: the gateway's own. Only a root gateway
    changes user, and only to one that can start the runtime with ``python``."""
    if not user or os.geteuid() != 0:
        return None
    uid_text, _, gid_text = user.partition(":")
    uid, gid = int(uid_text), int(gid_text or uid_text)
    try:
        probe = subprocess.run([python, "-c", "import faasrl.runtime.server"], user=uid,
                               group=gid, extra_groups=[], env=base_env(), cwd="/",
                               capture_output=True, timeout=60)
        failed = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] \
            if probe.returncode else []
    except (OSError, subprocess.SubprocessError) as exc:
        failed = [str(exc)]
    if failed:
        log.warning("function processes run as root: uid %d cannot start the runtime with %s "
                    "(%s); set FAASRL_FUNCTION_PYTHON to an interpreter it can run, or "
                    "FAASRL_FUNCTION_USER='' to run them as root knowingly", uid, python,
                    failed[0])
        return None
    return uid, gid


@dataclass
class Exec:
    """A container started as a new interpreter: the gateway's own child."""

    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def zygote(self) -> None:
        return None

    def exit_code(self) -> int | None:
        return self.proc.returncode if self.proc.returncode is not None else exited(self.pid)

    def reaped(self) -> bool:
        return self.proc.returncode is not None

    def reap(self) -> None:
        self.proc.wait()


@dataclass
class Forked:
    """A container forked by a zygote, which reports its exit and reaps it when told."""

    pid: int
    zygote: ZygoteClient

    def exit_code(self) -> int | None:
        return self.zygote.exit_code(self.pid)

    def reaped(self) -> bool:
        return False  # the zygote holds it until reap(), or it went with a dead zygote

    def reap(self) -> None:
        self.zygote.reap(self.pid)


class ProcessBackend(Backend):
    name = "process"

    @classmethod
    def from_settings(cls, settings: Settings) -> ProcessBackend:
        return cls(settings.state_dir, user=settings.function_user,
                   python=settings.function_python, zygote=settings.zygote,
                   env_layers_dir=settings.env_layers_folder)

    def __init__(self, state_dir: Path, *, user: str = "", python: Path | None = None,
                 zygote: bool = False, env_layers_dir: Path | None = None):
        self._records = Path(state_dir) / "containers"
        self._logs = Path(state_dir) / "logs"
        for folder in (self._records, self._logs):  # the gateway's alone
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._python = str(python or sys.executable)
        self.credentials = function_credentials(user, self._python)
        self._layers_dir = env_layers_dir  # as configured
        self._layers = None if env_layers_dir is None else \
            env_layers_folder(env_layers_dir, self.credentials)  # made at the first install
        self._owner = {"owner_pid": os.getpid(), "owner_start": process_start_time(os.getpid())}
        self._children: dict[str, Exec | Forked] = {}
        self._handles: dict[str, ContainerHandle] = {}
        self._tmp: dict[str, Path] = {}  # one HOME/TMPDIR per container, gone with it
        self.zygote: ZygoteClient | None = None
        self._last_zygote: ZygoteClient | None = None  # the newest, kept for what it reported
        self._respawn = zygote  # start a new zygote when this one is gone
        self._zygote_started = 0.0
        if zygote:
            self._start_zygote()

    def zygote_state(self) -> ZygoteState:
        last = self._last_zygote
        if last is None or (self.zygote is None and last.failure is None):
            return "gone" if self._respawn else "off"  # a new one starts with the next start
        return last.state

    def zygote_not_preloaded(self) -> dict[str, str]:
        return self._last_zygote.not_preloaded if self._last_zygote is not None else {}

    async def layer_store(self) -> LayerStore:
        """The layers folder, made (and, in the temporary folder, checked) here: functions
        started before it existed find their layers there all the same."""
        if self._layers is None or self._layers_dir is None:
            return await super().layer_store()
        claim_folder(self._layers, self._layers_dir)
        return LayerStore(self._layers, await self._target())

    async def _target(self) -> PythonTarget:
        try:
            return await asyncio.to_thread(interpreter_target, self._python)
        except TargetError as exc:
            raise LayerError(str(exc)) from None

    async def _layers_env(self) -> dict[str, str]:
        """``LAYERS_ENV`` of a container: its folder of env layers (none without one)."""
        if self._layers is None:
            return {}
        try:
            return {LAYERS_ENV: str(LayerStore(self._layers, await self._target()).root)}
        except LayerError as exc:
            log.warning("containers start without env layers: %s", exc)
            return {}

    def check(self, spec: FunctionSpec) -> dict[str, str]:
        fields = {}
        if spec.image:
            fields["image"] = ("the process backend runs no images: leave it out here (the "
                               "Docker backend runs them: FAASRL_BACKEND=docker)")
        if spec.code_dir and not Path(spec.code_dir).is_dir():
            fields["code_dir"] = f"{spec.code_dir} is not a folder on the gateway's host"
        return fields

    async def start(self, spec: FunctionSpec, container_id: str, gpus: tuple[int, ...] = (),
                    stem: ContainerHandle | None = None) -> ContainerHandle:
        # No stem cells here (has_stem_cells is False): the zygote is this backend's way.
        if spec.code_dir and not Path(spec.code_dir).is_dir():
            raise FileNotFoundError(f"code_dir {spec.code_dir} is not a folder on this host")
        tmp = self._private_dir(f"faasrl-{container_id}-")
        self._tmp[container_id] = tmp
        cwd = Path(spec.code_dir).absolute() if spec.code_dir else tmp  # the zygote is elsewhere
        env = container_env(spec.cpu, container_id, gpus, tmp, self._uid, gpu=spec.gpu) \
            | await self._layers_env()
        log_path = self._logs / f"{container_id}.log"
        started = None
        if (starting := self.zygote) is not None and not starting.was_ready \
                and fits(starting, spec.memory_mb):
            # A function that could be forked would, as a new interpreter, import what the
            # zygote is importing, on the same cores: the fork after its imports comes sooner
            # (a platform's first learner: 2.2 s against 3.6 s, and no 1 s first update).
            await starting.settled(ZYGOTE_WAIT_S)
        if (zygote := self._zygote_for(spec)) is not None:
            try:
                pid, port, secret = await fork_runtime(zygote, container_id, env, cwd,
                                                       spec.memory_mb, log_path)
                started = Forked(pid, zygote), port, secret
            except ZygoteGone as exc:
                log.warning("container %s starts without the zygote: %s", container_id, exc)
        child, port, secret = started or self._exec(env, cwd, spec.memory_mb, log_path)
        handle = ContainerHandle(container_id, spec.name, self.name, "127.0.0.1", port,
                                 child.pid, secret=secret)
        self._children[container_id] = child
        self._handles[container_id] = handle
        record = {"id": container_id, "function": spec.name, "pid": child.pid, "port": port,
                  "start_time": process_start_time(child.pid), "tmp": str(tmp),
                  "zygote": child.zygote.pid if child.zygote else None, **self._owner}
        (self._records / f"{container_id}.json").write_text(json.dumps(record))
        return handle

    def _exec(self, env: dict[str, str], cwd: Path, memory_mb: int,
              log_path: Path) -> tuple[Exec, int, str]:
        proc, port, secret = exec_runtime(self._python, env, cwd, memory_mb, log_path,
                                          **self._user())
        return Exec(proc), port, secret

    @property
    def _uid(self) -> int:
        """The uid function processes run as."""
        return os.geteuid() if self.credentials is None else self.credentials[0]

    def _user(self) -> dict[str, Any]:
        return {} if self.credentials is None else {
            "user": self.credentials[0], "group": self.credentials[1], "extra_groups": []}

    def _private_dir(self, prefix: str) -> Path:
        folder = Path(tempfile.mkdtemp(prefix=prefix))
        if self.credentials is not None:
            os.chown(folder, *self.credentials)
        return folder

    def _zygote_for(self, spec: FunctionSpec) -> ZygoteClient | None:
        """The zygote to fork this function's container from; None: start a new interpreter
        (starting a new zygote if the last one died after it had been ready)."""
        zygote = self.zygote
        if zygote is not None and zygote.gone:
            self._forget_zygote(zygote)
            self._respawn = self._respawn and zygote.was_ready  # no crash loop at start-up
            zygote = None
        if zygote is None:
            if self._respawn and time.monotonic() - self._zygote_started >= RESPAWN_S:
                self._start_zygote()
            return None
        if not zygote.usable:
            return None
        return zygote if fits(zygote, spec.memory_mb) else None

    def _start_zygote(self) -> None:
        tmp = self._private_dir("faasrl-zygote-")
        env = zygote_env(tmp, self._uid)
        self._zygote_started = time.monotonic()
        try:
            zygote = ZygoteClient(self._python, env, tmp, self._logs / "zygote.log", self._user(),
                            ZYGOTE_HEAP_MB)
        except OSError as exc:
            log.warning("no zygote, containers start as new interpreters: %s", exc)
            shutil.rmtree(tmp, ignore_errors=True)
            return
        self.zygote = self._last_zygote = zygote
        record = {"id": f"zygote-{zygote.pid}", "function": None, "pid": zygote.pid,
                  "start_time": process_start_time(zygote.pid), "tmp": str(tmp), **self._owner}
        (self._records / f"zygote-{zygote.pid}.json").write_text(json.dumps(record))

    def _forget_zygote(self, zygote: ZygoteClient) -> None:
        if self.zygote is zygote:
            self.zygote = None
        (self._records / f"zygote-{zygote.pid}.json").unlink(missing_ok=True)
        shutil.rmtree(zygote.cwd, ignore_errors=True)

    async def stop(self, handle: ContainerHandle, grace_s: float = 2.0) -> None:
        child = self._children.get(handle.id)
        if child is None:
            return
        await end_child(child, grace_s)
        self._children.pop(handle.id, None)
        self._handles.pop(handle.id, None)
        (self._records / f"{handle.id}.json").unlink(missing_ok=True)
        if (tmp := self._tmp.pop(handle.id, None)) is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def exit_code(self, handle: ContainerHandle) -> int | None:
        child = self._children.get(handle.id)
        return -1 if child is None else child.exit_code()

    def list_own(self) -> list[ContainerHandle]:
        return list(self._handles.values())

    def reap_orphans(self) -> int:
        reaped = 0
        for path in self._records.glob("*.json"):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                continue
            if is_alive(rec.get("owner_pid", 0), rec.get("owner_start")):
                continue  # another live platform owns it
            if is_alive(rec.get("pid", 0), rec.get("start_time")):
                kill_group(rec["pid"], signal.SIGKILL)
                reaped += 1
            path.unlink(missing_ok=True)
            if rec.get("tmp"):
                shutil.rmtree(rec["tmp"], ignore_errors=True)
        return reaped

    def stats(self, handle: ContainerHandle) -> ContainerStats | None:
        return process_stats(handle.pid) if handle.pid is not None else None

    def logs(self, handle: ContainerHandle, tail: int = 50) -> str:
        try:
            with open(self._logs / f"{handle.id}.log", errors="replace") as f:
                return "".join(deque(f, maxlen=tail))
        except OSError:
            return ""

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(h, grace_s=1.0) for h in list(self._handles.values())))
        if (zygote := self.zygote) is not None:
            await zygote.close()
            self._forget_zygote(zygote)


async def end_child(child: Exec | Forked, grace_s: float) -> None:
    """SIGTERM to a container's process group, SIGKILL after ``grace_s``, then reap it."""
    if child.reaped():
        return
    pid = child.pid
    kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    delay = 0.002
    while child.exit_code() is None and time.monotonic() < deadline:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    # The leader is now a zombie or still running: either way the group id is still ours, so
    # the rest of the group can be killed before the leader is reaped.
    kill_group(pid, signal.SIGKILL)
    while child.exit_code() is None:
        await asyncio.sleep(0.005)
    child.reap()


def zygote_env(tmp: Path, uid: int) -> dict[str, str]:
    """A zygote's environment: ``base_env`` (none of this process's secrets), its user, ``tmp``
    as HOME and TMPDIR, and one thread while it imports (numeric libraries would start pools a
    fork cannot copy)."""
    return {**base_env(), **user_env(uid), "HOME": str(tmp), "TMPDIR": str(tmp),
            **thread_env(1)}


def container_env(cpu: float, container_id: str, gpus: Sequence[int | str], tmp: Path,
                  uid: int | None = None, gpu: float = 0) -> dict[str, str]:
    """A container's process environment: ``base_env``, its thread pools, its GPUs (and its
    share of them: ``gpu``, its manifest's field), its id, its user (``uid``, this process's
    when not given) and its own HOME and TMPDIR."""
    return {**base_env(), **thread_env(cpu), "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
            **share_env(gpu),
            "FAASRL_CONTAINER_ID": container_id,
            **user_env(os.geteuid() if uid is None else uid), "HOME": str(tmp),
            "TMPDIR": str(tmp)}


def exec_runtime(python: str, env: dict[str, str], cwd: Path, memory_mb: int, log_path: Path,
                 host: str = "127.0.0.1", **popen: Any) -> tuple[subprocess.Popen[bytes], int,
                                                                 str]:
    """Start ``python -m faasrl.runtime`` as a new interpreter in a session of its own, on a
    listening socket bound here (so requests queue until it accepts) and with its secret on a
    pipe; returns the process, its port and the secret."""
    secret, secret_r = secret_pipe()
    try:
        with socket.create_server((host, 0), backlog=128) as sock, open(log_path, "ab") as out:
            fd = sock.fileno()
            proc = subprocess.Popen(
                [python, "-m", "faasrl.runtime", "--parent-pid", str(os.getpid()),
                 "--memory-mb", str(memory_mb), "--secret-fd", str(secret_r),
                 "--listen-fd", str(fd)],
                cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, pass_fds=(fd, secret_r), start_new_session=True,
                **popen)
            port = sock.getsockname()[1]
    finally:
        os.close(secret_r)
    return proc, port, secret


async def fork_runtime(zygote: ZygoteClient, container_id: str, env: dict[str, str], cwd: Path,
                       memory_mb: int, log_path: Path, host: str = "127.0.0.1"
                       ) -> tuple[int, int, str]:
    """:func:`exec_runtime`'s twin: fork the runtime from ``zygote``; returns its pid, its port
    and its secret. Raises ``ZygoteGone`` when the zygote cannot."""
    # A socket and secret of its own: after a failed fork the zygote's child may have read
    # this secret, so the fallback must not reuse it.
    secret, secret_r = secret_pipe()
    try:
        with socket.create_server((host, 0), backlog=128) as sock, open(log_path, "ab") as out:
            pid = await zygote.fork(container_id, env, str(cwd), memory_mb,
                                    (sock.fileno(), secret_r, out.fileno()))
            port = sock.getsockname()[1]
    finally:
        os.close(secret_r)
    return pid, port, secret


def fits(zygote: ZygoteClient, memory_mb: int) -> bool:
    """Whether a container of ``memory_mb`` holds a fork of ``zygote``: its heap, inherited,
    and room of its own (the heap is ``ZYGOTE_HEAP_MB`` until the ready zygote says what it
    is)."""
    return memory_mb >= zygote.data_mb + FORK_HEADROOM_MB


def secret_pipe() -> tuple[str, int]:
    """A new runtime secret, and the read end of a pipe that holds it."""
    secret = secrets.token_urlsafe(32)
    secret_r, secret_w = os.pipe()
    os.write(secret_w, secret.encode())
    os.close(secret_w)
    return secret, secret_r


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
