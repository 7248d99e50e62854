"""The writes to a job's keys, each written once and torch-free.

Every operation queues its commands on a pipeline (``redis.Redis.pipeline()`` in a function,
``redis.asyncio.Redis.pipeline()`` in the gateway: both queue commands the same way), so the
caller decides what commits together: a learner publishes weights, optimizer, its result and the
acknowledgement of its batches in one transaction, the workflow restores a checkpoint or resets
a round in one. Reads need no such care and use :mod:`faasrl.data.keys` directly.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from faasrl.data.keys import (
    gradients_key,
    latest_key,
    learner_weights_key,
    learners_key,
    optimizer_keys,
    parameter_state_key,
    params_key,
    trajectories_key,
    update_key,
)

Pipe = Any  # redis.client.Pipeline or redis.asyncio.client.Pipeline
# Published weight versions a job keeps in Redis, the newest ones (a publish deletes the one
# this many back). A synchronous or off-policy job's learner publishes one a round or a train
# call, and its actors read the newest: it keeps 4 (what the docs call the kept versions).
KEEP_VERSIONS = 4
# An asynchronous job's parameter function publishes one per gradient while learners still
# compute on older ones, and actors sample with those: it keeps more (IMPACT's target trail on
# top, contract_args.parameter_args).
ASYNC_KEEP_VERSIONS = 8


def put_weights(pipe: Pipe, job_id: str, version: int, blob: bytes, *,
                optimizer: bytes | None = None, keep: int | None = None) -> None:
    """Store ``version``'s weights and point ``latest`` at it. ``optimizer``: its state for
    this version, the state it replaces kept as the previous one (a rollback restores it);
    ``keep``: versions kept (the one ``keep`` back is deleted)."""
    pipe.set(params_key(job_id, version), blob)
    pipe.set(latest_key(job_id), version)
    if keep is not None and version - keep >= 0:
        pipe.delete(params_key(job_id, version - keep))
    if optimizer is not None:
        state_key, version_key = optimizer_keys(job_id)
        for key, previous in zip(optimizer_keys(job_id), optimizer_keys(job_id, previous=True),
                                 strict=True):
            pipe.copy(key, previous, replace=True)
        pipe.set(state_key, optimizer)
        pipe.set(version_key, version)


def roll_back(pipe: Pipe, job_id: str, *, to: int, latest: int, optimizer_kept: bool) -> None:
    """Go back from ``latest`` to version ``to``: its weights become the newest, the newer
    ones and the newest update's result go, and (``optimizer_kept``: the previous optimizer
    state belongs to ``to``) the optimizer state goes back too."""
    pipe.set(latest_key(job_id), to)
    pipe.delete(*(params_key(job_id, v) for v in range(to + 1, latest + 1)), update_key(job_id))
    if optimizer_kept:
        state_key, version_key = optimizer_keys(job_id)
        previous_state, _ = optimizer_keys(job_id, previous=True)
        pipe.copy(previous_state, state_key, replace=True)
        pipe.set(version_key, to)


def drop_batches(pipe: Pipe, job_id: str, entries: Collection[str]) -> None:
    """Remove trajectory entries that were trained on or never will be."""
    if entries:
        pipe.xdel(trajectories_key(job_id), *entries)


def unregister_learner(pipe: Pipe, job_id: str, slot: int) -> None:
    """An asynchronous learner slot is done: peers stop computing ratios against it."""
    pipe.hdel(learners_key(job_id), str(slot))
    pipe.delete(learner_weights_key(job_id, slot))


def reset_round(pipe: Pipe, job_id: str, learner_slots: Iterable[int],
                parameter_state: str) -> None:
    """Start an asynchronous round afresh: its batches, gradients and learner registrations
    dropped, the parameter function's state set to ``parameter_state`` (JSON)."""
    pipe.delete(trajectories_key(job_id), gradients_key(job_id), learners_key(job_id),
                *(learner_weights_key(job_id, slot) for slot in learner_slots))
    pipe.set(parameter_state_key(job_id), parameter_state)


def drop_stream(pipe: Pipe, job_id: str) -> None:
    """Off-policy: forget transitions no buffer took in (a resumed job's actors push anew)."""
    pipe.delete(trajectories_key(job_id))
