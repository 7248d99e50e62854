"""The actor function: rolls out a job's policy in envs kept warm in this container.

Per invocation it fetches the weights of the version it is given (only when that version is not
the one it already holds), steps its envs for one round, writes one safetensors blob to the job's
trajectory stream in Redis and returns a small JSON summary. Envs live per (job, slot), so
episodes continue across rounds as long as the slot keeps landing on this container; a slot new
to this container starts fresh envs seeded from (job seed, slot, round).

    args: faasrl.contracts.RolloutArgs | EvaluateArgs (``mode``: rollout | evaluate)
    result: RolloutResult | EvaluateResult

A ``version`` of null means the newest one published (asynchronous training: an actor samples
with the newest policy it sees). What the batch holds is the job's algorithm's
(``actor_batch``: PPO adds GAE, IMPACT the raw rewards and episode ends). The summary names the
batch's stream entry, the key a learner is handed.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any

import torch

from faasrl.algorithms import algorithm
from faasrl.contracts import (
    ACTOR_ARGS,
    EvaluateArgs,
    EvaluateResult,
    JobContext,
    RolloutResult,
    parse,
)
from faasrl.data.connection import function_redis
from faasrl.data.params import ParameterStore
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.rollout import Rollout, evaluate

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
_jobs: OrderedDict[str, _Job] = OrderedDict()
MAX_JOBS = 2  # jobs whose envs and policy one warm container keeps


class _Job:
    def __init__(self, job: JobContext):
        self.policy = ActorCritic(PolicySpec.from_dict(job.policy_spec()))
        self.policy.eval()
        self.version: int | None = None
        self.rollouts: dict[int, Rollout] = {}


def _job(job: JobContext) -> _Job:
    if job.id not in _jobs:
        _jobs[job.id] = _Job(job)
        while len(_jobs) > MAX_JOBS:
            _jobs.popitem(last=False)
    _jobs.move_to_end(job.id)
    return _jobs[job.id]


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    call = parse(ACTOR_ARGS, args, "actor args")
    job, cfg = call.job, call.job.hyperparameters
    r = function_redis(job.model_dump(include={"redis"}))
    store = ParameterStore(r, job.id)
    state = _job(job)
    t0 = time.monotonic()
    version = store.latest() if call.version is None else call.version
    fetched = state.version != version
    if fetched:
        weights, _ = store.load(version)
        state.policy.load_state_dict(weights)
        state.version = version
    t1 = time.monotonic()

    if isinstance(call, EvaluateArgs):
        returns = evaluate(state.policy, job.env_id, episodes=call.episodes, seed=call.seed)
        return EvaluateResult(returns=returns, version=version).model_dump(mode="json")

    slot, round_ = call.slot, call.round
    rollout = state.rollouts.get(slot)
    if rollout is None:
        seed = job.seed * 1_000_003 + slot * 10_007 + round_
        envs = make_vec_env(job.env_id, job.envs_per_actor, seed, gamma=cfg.gamma)
        rollout = state.rollouts[slot] = Rollout(envs, state.policy, num_steps=job.steps_per_actor,
                                                 gamma=cfg.gamma, seed=seed)
    steps, episodes = rollout.collect()
    batch = algorithm(cfg.algorithm).actor_batch(steps, cfg)
    t2 = time.monotonic()
    entry, nbytes = TrajectoryStream(r, job.id).append(round_, slot, version, batch,
                                                       compress=job.compress)
    t3 = time.monotonic()
    return RolloutResult(steps=len(batch["obs"]), version=version, entry=entry,
                         episodes=episodes, weights_fetched=fetched, fetch_s=t1 - t0,
                         rollout_s=t2 - t1, write_s=t3 - t2, bytes=nbytes
                         ).model_dump(mode="json")
