"""Tensors on the wire: safetensors blobs, optionally lz4-framed; pickle is never used.

A blob is either a plain safetensors file (readable by any safetensors reader) or a standard lz4
frame around one (for uint8 frames, which compress several-fold). ``decode`` tells the two apart
by the lz4 frame's magic number, so readers need no flag.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import lz4.frame
import numpy as np
import safetensors.numpy
import safetensors.torch
import torch

LZ4_MAGIC = b"\x04\x22\x4d\x18"


class CodecError(ValueError):
    """A blob that is not a (possibly lz4-framed) safetensors file."""


def _frame(payload: bytes, compress: bool) -> bytes:
    return lz4.frame.compress(payload) if compress else payload


def _unframe(blob: bytes) -> bytes:
    if blob[:4] != LZ4_MAGIC:
        return blob
    try:
        return lz4.frame.decompress(blob)
    except RuntimeError as exc:
        raise CodecError(f"corrupt lz4 frame: {exc}") from exc


def _metadata(payload: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors header (its first 8 bytes give the header size)."""
    if len(payload) < 8:
        raise CodecError(f"{len(payload)} bytes is too short for a safetensors blob")
    (size,) = struct.unpack("<Q", payload[:8])
    if size > len(payload) - 8:
        raise CodecError("the safetensors header runs past the end of the blob")
    try:
        header = json.loads(payload[8:8 + size])
    except ValueError as exc:
        raise CodecError(f"unreadable safetensors header: {exc}") from exc
    return header.get("__metadata__") or {}


def encode_arrays(arrays: Mapping[str, np.ndarray], *, metadata: Mapping[str, str] | None = None,
                  compress: bool = False) -> bytes:
    contiguous = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    return _frame(safetensors.numpy.save(contiguous, metadata=dict(metadata or {})), compress)


def decode_arrays(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    payload = _unframe(blob)
    meta = _metadata(payload)
    try:
        return safetensors.numpy.load(payload), meta
    except Exception as exc:  # safetensors raises its own error types for bad blobs
        raise CodecError(f"not a safetensors blob: {exc}") from exc


def encode_tensors(tensors: Mapping[str, torch.Tensor], *,
                   metadata: Mapping[str, str] | None = None) -> bytes:
    cpu = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    return safetensors.torch.save(cpu, metadata=dict(metadata or {}))


def decode_tensors(blob: bytes) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    payload = _unframe(blob)
    meta = _metadata(payload)
    try:
        return safetensors.torch.load(payload), meta
    except Exception as exc:
        raise CodecError(f"not a safetensors blob: {exc}") from exc


def encode_optimizer(state: Mapping[str, Any]) -> bytes:
    """A torch optimizer's ``state_dict()``: tensors by ``state.<param>.<name>``, the rest JSON;
    or a dict of several optimizers' by name (SAC's actor, critic and temperature), each under
    ``<name>.`` the same way."""
    single = "param_groups" in state
    parts = {"": state} if single else dict(state)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, dict[str, Any]]] = {}
    for part, one in parts.items():
        prefix = f"{part}." if part else ""
        for pid, per_param in one["state"].items():
            for name, value in per_param.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"{prefix}state.{pid}.{name}"] = value
                else:
                    scalars.setdefault(part, {}).setdefault(str(pid), {})[name] = value
    meta = {"param_groups": json.dumps({p: one["param_groups"] for p, one in parts.items()}),
            "scalars": json.dumps(scalars), "single": json.dumps(single)}
    return encode_tensors(tensors, metadata=meta)


def decode_optimizer(blob: bytes) -> dict[str, Any]:
    tensors, meta = decode_tensors(blob)
    groups: dict[str, Any] = json.loads(meta["param_groups"])
    scalars: dict[str, Any] = json.loads(meta.get("scalars", "{}"))
    if "single" not in meta:  # written before optimizers could come several to a blob
        groups, scalars = {"": groups}, {"": scalars}
    parts: dict[str, dict[str, Any]] = {p: {"state": {}, "param_groups": g}
                                        for p, g in groups.items()}
    for key, value in tensors.items():
        part, rest = ("", key) if key.startswith("state.") else key.split(".", 1)
        _, pid, name = rest.split(".", 2)
        parts[part]["state"].setdefault(int(pid), {})[name] = value
    for part, per_param in scalars.items():
        for pid, values in per_param.items():
            parts[part]["state"].setdefault(int(pid), {}).update(values)
    return parts.get("", parts)
