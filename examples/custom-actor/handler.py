"""A custom actor function for synchronous PPO jobs: the built-in actor's rollout in envs whose
rewards are multiplied by ``REWARD_SCALE`` (the manifest's ``env``). The scaling wraps each env
outside its episode statistics, so the returns it reports stay the env's own, and a time limit's
bootstrap (``gamma * V``, added by the rollout) is not scaled twice.

    args: faasrl.contracts.ActorArgs: ``rollout``, ``evaluate`` and ``describe`` (the submit's
          probe of the job's env, answered as the built-in actor does); ``explore``, for
          off-policy jobs, is refused
    result: faasrl.contracts.RolloutResult | EvaluateResult | DescribeResult, as JSON
"""

from __future__ import annotations

import os
import time
from typing import Any

from gymnasium.wrappers import TransformReward

from faasrl.algorithms import algorithm
from faasrl.contracts import (
    ACTOR_ARGS,
    DescribeArgs,
    EvaluateArgs,
    EvaluateResult,
    JobContext,
    RolloutArgs,
    RolloutResult,
    parse,
)
from faasrl.data.connection import function_redis
from faasrl.data.params import ParameterStore
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.env_probe import answer
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.rollout import Rollout, evaluate
from faasrl.rl.seeds import training_seed

SCALE = float(os.environ.get("REWARD_SCALE", "1"))
# A warm container keeps, per job, the policy and the version it holds, and per (job, slot) the
# envs mid-episode: the next round of the slot continues them.
_policies: dict[str, tuple[ActorCritic, int | None]] = {}
_rollouts: dict[tuple[str, int], Rollout] = {}


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    call = parse(ACTOR_ARGS, args, "actor args")  # a ContractError names a malformed field
    if isinstance(call, DescribeArgs):  # at submit: what the job's env is (faasrl builds it)
        return answer(call, getattr(context, "memory_limit_in_mb", 0) or 0).model_dump(
            mode="json")
    if not isinstance(call, RolloutArgs | EvaluateArgs):
        raise ValueError(f"scaled-actor runs rollouts and evaluations, not {call.mode!r}")
    job = call.job
    t0 = time.monotonic()
    policy, version, fetched = _policy(job, call.version)
    t1 = time.monotonic()
    if isinstance(call, EvaluateArgs):
        returns = evaluate(policy, job.env_id, episodes=call.episodes, seed=call.seed)
        return EvaluateResult(returns=returns, version=version).model_dump(mode="json")

    cfg = job.hyperparameters
    rollout = _rollouts.get((job.id, call.slot))
    started = rollout is None
    if rollout is None:
        seed = training_seed(job.seed, call.slot, call.round)
        envs = make_vec_env(job.env_id, job.envs_per_actor, seed, gamma=cfg.gamma)
        envs.envs = [TransformReward(env, lambda reward: SCALE * reward) for env in envs.envs]
        rollout = _rollouts[job.id, call.slot] = Rollout(
            envs, policy, num_steps=job.steps_per_actor, gamma=cfg.gamma, seed=seed)
    steps, episodes = rollout.collect()
    batch = algorithm(cfg.algorithm).actor_batch(steps, cfg)  # what batch_schema describes
    t2 = time.monotonic()
    r = function_redis(job.model_dump(include={"redis"}))
    entry, nbytes = TrajectoryStream(r, job.id).append(call.round, call.slot, version, batch,
                                                       compress=job.compress)
    return RolloutResult(steps=len(batch["obs"]), version=version, entry=entry,
                         episodes=episodes, weights_fetched=fetched, fetch_s=t1 - t0,
                         rollout_s=t2 - t1, write_s=time.monotonic() - t2, bytes=nbytes,
                         envs_started=started).model_dump(mode="json")


def _policy(job: JobContext, version: int | None) -> tuple[ActorCritic, int, bool]:
    """The job's policy with the weights of ``version`` (None: the newest published), fetched
    from the job's Redis only when the container holds another one."""
    store = ParameterStore(function_redis(job.model_dump(include={"redis"})), job.id)
    version = store.latest() if version is None else version
    if job.id not in _policies:  # the network the job's Config names, as the learner built it
        cfg = job.hyperparameters
        spec = PolicySpec.from_dict(job.policy_spec())
        _policies[job.id] = (algorithm(cfg.algorithm).make_model(spec, cfg), None)
    policy, held = _policies[job.id]
    fetched = held != version
    if fetched:
        weights, _ = store.load(version)
        policy.load_state_dict(weights)
        policy.eval()
    _policies[job.id] = (policy, version)
    return policy, version, fetched
