"""The gateway's side of env layers: install an archive's ``requirements.txt`` once.

``ensure_layer`` runs pip with ``--only-binary=:all:`` (wheels are unpacked, never built: no
``setup.py`` of anyone's runs in the gateway) and ``--target`` a temporary folder beside the
layer, made world-readable and renamed into place when pip is done, so a layer is either
whole or absent; a layer that exists is the cache. One install per archive at a time: an
asyncio lock within the gateway and a file lock across processes sharing the folder, so
concurrent submits of one archive install it once. pip takes its index settings from the
environment (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``, ...) and nothing else of
the gateway's (its token, its cloud credentials). Requirements must be package requirements:
pip options, URLs and paths in the file are refused (they could point pip at the gateway's
own files or turn source builds back on).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
import weakref
import zipfile
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from faasrl.code_archive import SHA256_PATTERN
from faasrl.env_layers import REQUIREMENTS
from faasrl.env_layers.target import PythonTarget, TargetError, interpreter_target

INSTALL_TIMEOUT_S = 600.0  # pip's longest run for one layer
TAIL_LINES = 12  # of pip's output, in the error of a failed install
MARKER = ".faasrl-layer.json"  # in a finished layer: what it holds, for whom, how long it took
# What pip gets of the gateway's environment, besides every PIP_* variable.
PIP_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY",
                  "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE",
                  "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
_COMMENT = re.compile(r"(^|\s)#.*$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[\w\s,.-]*\])?\s*([<>=!~;(].*)?$")
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = \
    weakref.WeakKeyDictionary()


class LayerError(Exception):
    """A layer that cannot be made: its message says why (pip's last lines), for a 422."""


Progress = Callable[[str], None]


@dataclass(frozen=True)
class LayerStore:
    """Where a backend's layers go (``folder``, shared by every target) and the Python its
    functions run (``target``)."""

    folder: Path
    target: PythonTarget

    @property
    def root(self) -> Path:
        """This target's layers, one folder per archive: what functions see as
        ``FAASRL_ENV_LAYERS``."""
        return self.folder / self.target.key

    async def ensure(self, archive: bytes, sha256: str, *,
                     progress: Progress | None = None) -> Path | None:
        return await ensure_layer(self.root, archive, sha256, progress=progress,
                                  target=self.target)


def open_folder(folder: Path) -> Path:
    """Make ``folder`` (and what is missing above it) if need be, and let everyone list and
    pass it: function processes run as another user than the gateway."""
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & 0o555 != 0o555:
        folder.chmod(mode | 0o555)
    return folder


def requirements_of(archive: bytes) -> list[str]:
    """The requirements of an archive's top-level ``requirements.txt`` (none: no file)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            raw = zf.read(REQUIREMENTS)
    except KeyError:
        return []
    except zipfile.BadZipFile as exc:
        raise LayerError(f"not a zip archive: {exc}") from None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise LayerError(f"{REQUIREMENTS} is not UTF-8 text") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", line).strip()
        if not line:
            continue
        if line.startswith("-"):
            raise LayerError(f"{REQUIREMENTS} line {number}: pip options ({line.split()[0]}) "
                             "are not taken; the platform sets the index")
        if "@" in line or "://" in line or "\\" in line or not _REQUIREMENT.match(line):
            raise LayerError(f"{REQUIREMENTS} line {number}: {line!r} is not a package "
                             "requirement (name[extras] specifiers; marker): URLs and paths "
                             "are not taken")
        found.append(line)
    return found


async def ensure_layer(root: Path, archive: bytes, sha256: str, *,
                       progress: Progress | None = None, target: PythonTarget | None = None,
                       timeout_s: float = INSTALL_TIMEOUT_S) -> Path | None:
    """The layer of the archive ``sha256`` under ``root``, installed for ``target`` (this
    interpreter by default) if it is not there yet; None when the archive has no
    requirements. pip's output lines go to ``progress``; a failed install raises LayerError."""
    if not re.fullmatch(SHA256_PATTERN, sha256):
        raise LayerError(f"{sha256!r} is not an archive's sha256")
    requirements = requirements_of(archive)
    if not requirements:
        return None
    final = root / sha256
    if final.is_dir():
        return final
    async with _lock(final), _file_lock(root, sha256):
        if final.is_dir():  # installed while this one waited
            return final
        if target is None:
            try:
                target = await asyncio.to_thread(interpreter_target, sys.executable)
            except TargetError as exc:
                raise LayerError(str(exc)) from None
        await _install(root, sha256, requirements, target, progress, timeout_s)
    return final


async def _install(root: Path, sha256: str, requirements: list[str], target: PythonTarget,
                   progress: Progress | None, timeout_s: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{sha256}-", dir=root))
    started = time.monotonic()
    try:
        cmd = [*target.pip(), "--target", str(tmp), "--only-binary=:all:", "--no-input",
               "--disable-pip-version-check", "--progress-bar", "off",
               "--no-warn-script-location", *requirements]
        tail = await _run_pip(cmd, root, progress, timeout_s)
        await asyncio.to_thread(_readable, tmp)
        (tmp / MARKER).write_text(json.dumps({
            "requirements": requirements, "target": target.key,
            "install_s": round(time.monotonic() - started, 3), "pip_tail": tail}))
        (tmp / MARKER).chmod(0o644)
        tmp.rename(root / sha256)
    finally:
        if tmp.exists():
            await asyncio.to_thread(shutil.rmtree, tmp, True)


async def _run_pip(cmd: list[str], cwd: Path, progress: Progress | None,
                   timeout_s: float) -> list[str]:
    """Run pip, forwarding its lines; its last lines, or LayerError with them."""
    env = {k: v for k, v in os.environ.items() if k in PIP_PASSED_ENV or k.startswith("PIP_")}
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True, limit=1 << 20)
    tail: deque[str] = deque(maxlen=TAIL_LINES)

    async def pump() -> int:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            if line := raw.decode(errors="replace").rstrip():
                tail.append(line)
                if progress is not None:
                    progress(line)
        return await proc.wait()

    try:
        code = await asyncio.wait_for(pump(), timeout_s)
    except TimeoutError:
        raise LayerError(f"installing {REQUIREMENTS} took longer than {timeout_s:g} s; pip's "
                         "last lines:\n" + "\n".join(tail)) from None
    finally:
        if proc.returncode is None:  # timed out or cancelled: pip and its children go
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    if code != 0:
        raise LayerError(f"pip could not install {REQUIREMENTS} (binary wheels only, no "
                         "source builds):\n" + "\n".join(tail))
    return list(tail)


def _readable(folder: Path) -> None:
    """Everyone may read the layer (functions run as an unprivileged user, 10001 in the
    images), no one but the gateway may write it."""
    folder.chmod(0o755)
    for path, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(path, name), 0o755)
        for name in files:
            full = os.path.join(path, name)
            if not os.path.islink(full):
                os.chmod(full, 0o755 if os.stat(full).st_mode & 0o100 else 0o644)


def _lock(final: Path) -> asyncio.Lock:
    """This event loop's lock of a layer (an asyncio lock belongs to one loop)."""
    return _locks.setdefault(asyncio.get_running_loop(), {}).setdefault(final, asyncio.Lock())


@contextlib.asynccontextmanager
async def _file_lock(root: Path, sha256: str) -> AsyncIterator[None]:
    """The install of ``sha256`` under ``root``, one process at a time (polled: a blocking
    flock would hold a thread); leftovers of a crashed install go once it is held."""
    open_folder(root)
    fd = os.open(root / f".{sha256}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.1)
        for stale in root.glob(f".{sha256}-*"):
            await asyncio.to_thread(shutil.rmtree, stale, True)
        yield
    finally:
        os.close(fd)
