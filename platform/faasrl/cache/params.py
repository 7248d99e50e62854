"""Versioned policy weights (and the learner's optimizer state) of one job.

Versions are published with a ``latest`` pointer; the last ``keep`` versions stay readable, so an
actor still finishing an older round (or an asynchronous learner) can fetch the version it used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from redis import Redis

from faasrl.cache.codec import decode_optimizer, decode_tensors, encode_optimizer, encode_tensors
from faasrl.cache.keys import job_key


class MissingVersion(LookupError):
    pass


class ParameterStore:
    def __init__(self, redis: Redis, job_id: str, *, keep: int = 4):
        self._redis = redis
        self._job = job_id
        self._keep = keep

    def _params(self, version: int) -> str:
        return job_key(self._job, "params", version)

    def publish(self, version: int, state: Mapping[str, torch.Tensor],
                metadata: Mapping[str, str] | None = None) -> int:
        """Store a version and point ``latest`` at it; returns the blob's size in bytes."""
        blob = encode_tensors(state, metadata={**(metadata or {}), "version": str(version)})
        self.publish_blob(version, blob)
        return len(blob)

    def publish_blob(self, version: int, blob: bytes) -> None:
        with self._redis.pipeline() as pipe:
            pipe.set(self._params(version), blob)
            pipe.set(job_key(self._job, "params", "latest"), version)
            if version - self._keep >= 0:
                pipe.delete(self._params(version - self._keep))
            pipe.execute()

    def latest(self) -> int | None:
        raw = self._redis.get(job_key(self._job, "params", "latest"))
        return None if raw is None else int(raw)

    def load_blob(self, version: int | None = None) -> bytes:
        version = self.latest() if version is None else version
        blob = None if version is None else self._redis.get(self._params(version))
        if blob is None:
            raise MissingVersion(f"job {self._job}: no weights for version {version} "
                                 f"(latest is {self.latest()}, {self._keep} are kept)")
        return blob

    def load(self, version: int | None = None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        return decode_tensors(self.load_blob(version))

    def save_optimizer(self, state: Mapping[str, Any], version: int) -> None:
        """The optimizer state that goes with weights ``version`` (the learner's warm state)."""
        self._redis.set(job_key(self._job, "optimizer"), encode_optimizer(state))
        self._redis.set(job_key(self._job, "optimizer", "version"), version)

    def load_optimizer(self) -> tuple[dict[str, Any], int] | None:
        blob = self._redis.get(job_key(self._job, "optimizer"))
        version = self._redis.get(job_key(self._job, "optimizer", "version"))
        if blob is None or version is None:
            return None
        return decode_optimizer(blob), int(version)
