"""The policy function: one version of a job's model, loaded once per container and kept warm.

Its manifest's environment names the job, the version and the job's serving user (a
:class:`faasrl.contracts.PolicyConfig`, set by ``faasrl jobs serve``); the model is read from
that version's served copy (``faasrl.data.keys.served_key``), the only keys the user may read,
and rebuilt with faasrl's own networks (:mod:`faasrl.rl.serving`): nothing of the env's code is
needed. The model is loaded again only when the configuration changes (a replaced manifest
starts new containers, so in practice once per container). A container serves a few
invocations at once (the manifest's ``max_concurrency``): the gateway's next one is already
there when the last answer leaves.

    args: faasrl.rl.serving.PolicyRequest  ({"obs": ..., "outputs", "sample", "session", ...})
    result: {"actions": ..., "version": N, plus "values" / "q_values" / "log_probs" if asked}
"""

from __future__ import annotations

import os
import threading
from typing import Any

import torch

from faasrl.contracts import POLICY_ENV, PolicyConfig
from faasrl.data.connection import function_redis
from faasrl.data.keys import served_key
from faasrl.rl.serving import ServedPolicy

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
_served: tuple[str | None, ServedPolicy] | None = None  # (its configuration, the model)
_loading = threading.Lock()  # the manifest's max_concurrency: invocations share the model


def _policy() -> ServedPolicy:
    global _served
    raw = os.environ.get(POLICY_ENV)
    if _served is not None and _served[0] == raw:
        return _served[1]
    with _loading:
        if _served is not None and _served[0] == raw:
            return _served[1]
        config = PolicyConfig.from_env(dict(os.environ))
        redis = function_redis({"redis": config.redis.model_dump()})
        blob = redis.get(served_key(config.job, config.version))
        if blob is None:
            raise LookupError(f"job {config.job}: no served copy of version {config.version} "
                              "(the job was deleted?)")
        _served = (raw, ServedPolicy(blob))
        return _served[1]


def main(args: Any, context: Any) -> dict[str, Any]:
    return _policy().answer(args)
