"""Saved MinionsRL schedulers: ``<dir>/<name>.safetensors`` (weights) + ``<name>.json`` (meta).

The weights are the scheduler's actor-critic ``state_dict`` (``faasrl.rl.policy.ActorCritic``
with an 8-number observation, I_max actions, 2x64 tanh and observation normalisation) saved as
numpy arrays, so the gateway loads and runs them without torch. The default folder is
``<state_dir>/schedulers`` (``FAASRL_SCHEDULERS_DIR`` overrides it).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy

SCHEDULER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SchedulerNotFound(LookupError):
    pass


def _paths(folder: Path, name: str) -> tuple[Path, Path]:
    if not SCHEDULER_NAME.match(name):
        raise ValueError(f"scheduler name {name!r}: letters, digits, '.', '_' and '-' only")
    return folder / f"{name}.safetensors", folder / f"{name}.json"


def save_scheduler(folder: Path, name: str, weights: dict[str, np.ndarray],
                   meta: dict[str, Any]) -> Path:
    """Write both files atomically (a job loading the scheduler never sees half of one)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors, info = _paths(folder, name)
    for path, write in ((tensors, lambda p: safetensors.numpy.save_file(
            {k: np.ascontiguousarray(v) for k, v in weights.items()}, str(p))),
                        (info, lambda p: p.write_text(json.dumps(meta, indent=2)))):
        tmp = path.with_name(path.name + ".tmp")
        write(tmp)
        os.replace(tmp, path)
    return tensors


def load_scheduler(folder: Path, name: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    tensors, info = _paths(folder, name)
    if not tensors.exists() or not info.exists():
        raise SchedulerNotFound(f"no scheduler named {name!r} in {folder}")
    return safetensors.numpy.load_file(str(tensors)), json.loads(info.read_text())


def list_schedulers(folder: Path) -> list[dict[str, Any]]:
    """The meta of every saved scheduler, by name."""
    if not folder.is_dir():
        return []
    return [{"name": p.stem, **json.loads(p.read_text())} for p in sorted(folder.glob("*.json"))
            if p.with_suffix(".safetensors").exists()]


def delete_scheduler(folder: Path, name: str) -> None:
    tensors, info = _paths(folder, name)
    if not tensors.exists():
        raise SchedulerNotFound(f"no scheduler named {name!r} in {folder}")
    tensors.unlink()
    info.unlink(missing_ok=True)
