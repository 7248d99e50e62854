"""Users' environments from their code: unpack an env archive once, import it, make the env.

A job that brings its env as code (:class:`~faasrl.env_code.EnvCode`) has its archive in the
job's Redis (the function reads it, :func:`install` unpacks it) or inline (the describe probe).
Each archive is unpacked once per process, into a folder named by its sha256 under the
container's temp dir, and put first on ``sys.path``; invocations on other threads wait for the
one unpacking. Two archives may hold modules of the same name (two jobs' ``corridor``): an
archive's imports evict a module of that name loaded from elsewhere, so each job imports its
own (envs already built keep the classes they were made from).

Every failure is an :class:`EnvError` naming the stage (``faasrl.env_code.EnvStage``) and the
exception's last lines: what a describe answers and a failed job reports.
"""

from __future__ import annotations

import atexit
import importlib
import io
import os
import shutil
import sys
import tempfile
import threading
import traceback
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from faasrl.code_archive import ArchiveError, check, digest
from faasrl.env_code import EnvCode, EnvStage
from faasrl.env_layers import activate

TRACEBACK_LINES = 6  # of the user's exception, in an EnvError's message
_lock = threading.RLock()  # unpacking and importing users' modules
_folders: dict[str, Path] = {}  # archive sha256 -> where it is unpacked (and on sys.path)


class EnvError(RuntimeError):
    """Building or stepping an env failed at ``stage``; ``detail`` says how (the exception's
    last lines), ``env`` names the env when known."""

    def __init__(self, stage: EnvStage, detail: str, env: str | None = None):
        where = f"env {env!r} failed at {stage}" if env else f"env failed at {stage}"
        super().__init__(f"{where}: {detail}")
        self.stage, self.detail, self.env = stage, detail, env


def last_lines(exc: BaseException, lines: int = TRACEBACK_LINES) -> str:
    """The end of ``exc``'s traceback: where in the user's code, and what."""
    text = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return "\n".join(text[-lines:])


def env_name(env_id: str, env: EnvCode | None) -> str:
    """How errors and records name the env: its entry point, else its id."""
    return env.entry_point if env is not None and env.entry_point else env_id


def _cache_root() -> Path:
    return Path(tempfile.gettempdir()) / f"faasrl-env-{os.getpid()}"


def install(data: bytes, sha256: str | None = None) -> Path:
    """Unpack the archive ``data`` (once per process) and put it first on ``sys.path``, its env
    layer (``faasrl.env_layers``) last; returns its folder. ``sha256``: what ``data`` must
    hash to (the job's ``code_sha256``)."""
    sha = digest(data)
    if sha256 is not None and sha != sha256:
        raise EnvError("code", f"the archive's sha256 is {sha}, not the job's {sha256}")
    with _lock:
        if sha in _folders:
            return _folders[sha]
        try:
            check(data)
        except ArchiveError as exc:
            raise EnvError("code", str(exc)) from None
        root = _cache_root()
        root.mkdir(parents=True, exist_ok=True)
        if not _folders:
            atexit.register(shutil.rmtree, root, True)
        folder = Path(tempfile.mkdtemp(prefix=f"{sha[:16]}-", dir=root))
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            zf.extractall(folder)
        sys.path.insert(0, str(folder))
        activate(sha)  # its requirements.txt's packages, where the backend gives a layer
        _folders[sha] = folder
        return folder


def ensure(env: EnvCode | None, fetch: Callable[[], bytes | None]) -> None:
    """``env``'s archive installed, read with ``fetch`` (from the job's Redis) only the first
    time this process needs it; concurrent invocations wait for the first."""
    if env is None or env.code_sha256 is None or env.code_sha256 in _folders:
        return
    with _lock:
        if env.code_sha256 in _folders:
            return
        data = fetch()
        if data is None:
            raise EnvError("code", f"the job's env archive {env.code_sha256} is not in Redis",
                           env.entry_point)
        install(data, env.code_sha256)


def _import(name: str, folder: Path | None) -> Any:
    """``import name``, from ``folder`` when given (evicting a same-named module another
    archive loaded; never one the archive does not hold, such as an installed package).
    Call with the lock held."""
    if folder is not None:
        top = name.partition(".")[0]
        loaded = sys.modules.get(top)
        where = getattr(loaded, "__file__", None) or ""
        ours = (folder / f"{top}.py").is_file() or (folder / top).is_dir()
        if ours and loaded is not None and not Path(where).is_relative_to(folder):
            for key in [k for k in sys.modules if k == top or k.startswith(f"{top}.")]:
                del sys.modules[key]
        if str(folder) in sys.path:
            sys.path.remove(str(folder))
        sys.path.insert(0, str(folder))
        importlib.invalidate_caches()
    return importlib.import_module(name)


def resolve(env_id: str, env: EnvCode) -> Any:
    """Import the env's modules (its archive's, when it has one); returns what its entry point
    names, or None (``env_id``, an id its imports registered)."""
    name = env_name(env_id, env)
    folder = None
    if env.code_sha256 is not None:
        folder = _folders.get(env.code_sha256)
        if folder is None:
            raise EnvError("code", f"archive {env.code_sha256} is not installed here", name)
    with _lock:
        try:
            for module in env.imports:
                _import(module, folder)
            if env.entry_point is None:
                return None
            module, _, attr = env.entry_point.partition(":")
            target = _import(module, folder)
            for part in attr.split("."):
                target = getattr(target, part)
            return target
        except BaseException as exc:
            raise EnvError("import", last_lines(exc), name) from exc


def make(env_id: str, env: EnvCode | None, **make_kwargs: Any) -> gym.Env:
    """The bare env: ``gymnasium.make(env_id, **make_kwargs)`` for a registered id; for code,
    its ``imports`` imported, then ``entry_point(**kwargs)`` (or ``gymnasium.make(env_id)``,
    an id they registered), cut at ``max_episode_steps`` (gymnasium's ``TimeLimit``)."""
    if env is None:
        return gym.make(env_id, **make_kwargs)
    name = env_name(env_id, env)
    target = resolve(env_id, env)
    try:
        if target is None:
            return gym.make(env_id, max_episode_steps=env.max_episode_steps, **env.kwargs)
        made = target(**env.kwargs)
    except BaseException as exc:
        raise EnvError("make", last_lines(exc), name) from exc
    if not isinstance(made, gym.Env):
        raise EnvError("make", f"{env.entry_point}(**kwargs) returned a "
                               f"{type(made).__name__}, not a gymnasium.Env", name)
    if env.max_episode_steps is not None:
        made = gym.wrappers.TimeLimit(made, env.max_episode_steps)
    return made
