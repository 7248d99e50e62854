"""Job checkpoints on disk: the record (round, controller state, costs), weights and optimizer.

Redis holds the live state; these files let a job be resumed when Redis lost it, and give users
a model file without the API. Each file is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import os
from pathlib import Path

RECORD, WEIGHTS, OPTIMIZER = "record.json", "weights.safetensors", "optimizer.safetensors"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_checkpoint(folder: Path, record_json: str, weights: bytes,
                     optimizer: bytes | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / WEIGHTS, weights)
    if optimizer is not None:
        _write(folder / OPTIMIZER, optimizer)
    _write(folder / RECORD, record_json.encode())  # last: it says which weights are there


def read_checkpoint(folder: Path) -> tuple[str, bytes, bytes | None] | None:
    if not (folder / RECORD).is_file() or not (folder / WEIGHTS).is_file():
        return None
    optimizer = folder / OPTIMIZER
    return ((folder / RECORD).read_text(), (folder / WEIGHTS).read_bytes(),
            optimizer.read_bytes() if optimizer.is_file() else None)
