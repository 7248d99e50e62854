"""Versioned policy weights (and the learner's optimizer state) of one job.

Versions are published with a ``latest`` pointer; the last ``keep`` versions stay readable, so an
actor still finishing an older round (or an asynchronous learner) can fetch the version it used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from redis import Redis
from redis.client import Pipeline

from faasrl.data.codec import decode_optimizer, decode_tensors, encode_optimizer, encode_tensors
from faasrl.data.keys import latest_key, optimizer_keys, params_key
from faasrl.data.ops import put_weights

KEEP = 4  # versions a store keeps readable unless told otherwise


class MissingVersion(LookupError):
    pass


class ParameterStore:
    def __init__(self, redis: Redis, job_id: str, *, keep: int = KEEP):
        self._redis = redis
        self._job = job_id
        self._keep = keep

    def publish(self, version: int, state: Mapping[str, torch.Tensor],
                metadata: Mapping[str, str] | None = None, *,
                optimizer: Mapping[str, Any] | None = None,
                also: Callable[[Pipeline], object] | None = None) -> int:
        """Store a version and point ``latest`` at it; returns the blob's size in bytes.

        ``optimizer`` (its state for this version) and whatever ``also`` queues on the pipeline
        are committed in the same transaction: a parameter function that dies mid-publish
        leaves either all of it or none.
        """
        blob = encode_tensors(state, metadata={**(metadata or {}), "version": str(version)})
        with self._redis.pipeline() as pipe:
            put_weights(pipe, self._job, version, blob, keep=self._keep,
                        optimizer=None if optimizer is None else encode_optimizer(optimizer))
            if also is not None:
                also(pipe)
            pipe.execute()
        return len(blob)

    def latest(self) -> int | None:
        raw = self._redis.get(latest_key(self._job))
        return None if raw is None else int(raw)

    def load(self, version: int | None = None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        version = self.latest() if version is None else version
        blob = None if version is None else self._redis.get(params_key(self._job, version))
        if blob is None:
            raise MissingVersion(f"job {self._job}: no weights for version {version} "
                                 f"(latest is {self.latest()}, {self._keep} are kept)")
        return decode_tensors(blob)

    def load_optimizer(self) -> tuple[dict[str, Any], int] | None:
        blob, version = self._redis.mget(optimizer_keys(self._job))
        if blob is None or version is None:
            return None
        return decode_optimizer(blob), int(version)
