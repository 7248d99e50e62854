"""The actor function: rolls out a job's policy in envs kept warm in this container.

Off-policy jobs (``explore``) step their envs with the algorithm's exploring policy instead (an
Ape-X actor's own ε), build n-step transitions (:mod:`faasrl.rl.explore`), compute each one's
initial priority with their copy of the online and target networks, and push
(transition, priority) to the job's stream for the buffer function.

Per invocation it fetches the weights of the version it is given (only when that version is not
the one it already holds), steps its envs for one round, writes one safetensors blob to the job's
trajectory stream in Redis and returns a small JSON summary. Envs live per (job, slot), so
episodes continue across rounds as long as the slot keeps landing on this container (the
manifest's ``affinity: wait`` makes the pool send it back here); a slot new to this container
starts fresh envs seeded from (job seed, slot, round) and says so (``envs_started``), which the
job counts as an env restart when the slot had envs before. A container keeps the state of as
many jobs as its memory allows: above ``MEMORY_SHARE`` of its limit, each invocation drops the
least recently used other job's.

    args: faasrl.contracts.RolloutArgs | EvaluateArgs | ExploreArgs | DescribeArgs (``mode``)
    result: RolloutResult | EvaluateResult | ExploreResult | DescribeResult

A job whose env comes as code (``job.env``) has its archive read from the job's Redis once per
container (:func:`faasrl.rl.env_loader.ensure`). ``describe`` is the gateway's submit-time probe
of an env (no job yet: the archive comes inline): it builds the env in a child process bounded
in time, tries it, runs gymnasium's env checker and answers what it found or where it failed.

A ``version`` of null means the newest one published (asynchronous and off-policy training: an
actor samples with the newest policy it sees; on a virtual clock the workflow names the one
current at the actor's virtual start). What the batch holds is the job's algorithm's
(``actor_batch``: PPO adds GAE, IMPACT the raw rewards and episode ends). The summary names the
batch's stream entry, the key a learner is handed.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from faasrl.algorithms import algorithm
from faasrl.contracts import (
    ACTOR_ARGS,
    DescribeArgs,
    EvaluateArgs,
    EvaluateResult,
    ExploreArgs,
    ExploreResult,
    JobContext,
    RolloutResult,
    parse,
)
from faasrl.data.connection import function_redis
from faasrl.data.keys import env_code_key
from faasrl.data.params import ParameterStore
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.env_loader import ensure
from faasrl.rl.env_probe import answer
from faasrl.rl.envs import make_vec_env
from faasrl.rl.explore import Explorer
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.rollout import OffPolicyActing, Rollout, acting, evaluate
from faasrl.rl.seeds import training_seed
from faasrl.runtime.server import status_mb

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
_jobs: OrderedDict[str, _Job] = OrderedDict()  # least recently used first
MEMORY_SHARE = 0.75  # of the container's memory limit: above it, other jobs' state is dropped


class _Job:
    def __init__(self, job: JobContext):
        cfg = job.hyperparameters
        self.module = algorithm(cfg.algorithm)
        self.policy = self.module.make_model(PolicySpec.from_dict(job.policy_spec()), cfg)
        self.spec: PolicySpec = self.policy.spec
        self.policy.eval()
        self.version: int | None = None
        self.rollouts: dict[int, Rollout] = {}
        self.explorers: dict[int, tuple[Explorer, torch.Generator]] = {}

    def evaluated(self, cfg: Any) -> ActorCritic | OffPolicyActing:
        """What :func:`evaluate` steps: the policy, or an off-policy model acting greedily."""
        return acting(self.module, self.policy, cfg)


def _job(job: JobContext, memory_limit_mb: float) -> _Job:
    """The job's state, made the most recently used. Over ``MEMORY_SHARE`` of the limit (the
    heap, as the runtime's limit counts it), the least recently used other job's state goes:
    one per invocation, since freed memory is reused rather than returned at once."""
    if job.id not in _jobs:
        _jobs[job.id] = _Job(job)
    _jobs.move_to_end(job.id)
    if len(_jobs) > 1 and memory_limit_mb:  # only then is there a heap to read
        used = status_mb("VmData")
        if used is not None and used > MEMORY_SHARE * memory_limit_mb:
            _jobs.popitem(last=False)
    return _jobs[job.id]


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    call = parse(ACTOR_ARGS, args, "actor args")
    memory_limit_mb = getattr(context, "memory_limit_in_mb", 0) or 0
    if isinstance(call, DescribeArgs):
        return answer(call, memory_limit_mb).model_dump(mode="json")
    job, cfg = call.job, call.job.hyperparameters
    r = function_redis(job.model_dump(include={"redis"}))
    ensure(job.env, lambda: r.get(env_code_key(job.id)))
    store = ParameterStore(r, job.id)
    state = _job(job, memory_limit_mb)
    t0 = time.monotonic()
    # Calls given no version take the newest one.
    version = store.latest() if call.version is None else call.version
    fetched = state.version != version
    if fetched:
        weights, _ = store.load(version)
        state.policy.load_state_dict(weights)
        state.version = version
    t1 = time.monotonic()

    if isinstance(call, EvaluateArgs):
        returns = evaluate(state.evaluated(cfg), job.env_id, job.env, episodes=call.episodes,
                           seed=call.seed)
        return EvaluateResult(returns=returns, version=version).model_dump(mode="json")
    if isinstance(call, ExploreArgs):
        return explore(call, r, state, version, fetched, t1 - t0).model_dump(mode="json")

    slot, round_ = call.slot, call.round
    rollout = state.rollouts.get(slot)
    started = rollout is None
    if started:
        seed = training_seed(job.seed, slot, round_)
        envs = make_vec_env(job.env_id, job.envs_per_actor, seed, env=job.env, gamma=cfg.gamma,
                            backend=job.env_backend)
        rollout = state.rollouts[slot] = Rollout(envs, state.policy, num_steps=job.steps_per_actor,
                                                 gamma=cfg.gamma, seed=seed)
    try:
        steps, episodes = rollout.collect()
    except Exception:  # an env that failed mid-round: a retry starts the slot's envs afresh
        del state.rollouts[slot]
        raise
    batch = algorithm(cfg.algorithm).actor_batch(steps, cfg)
    t2 = time.monotonic()
    entry, nbytes = TrajectoryStream(r, job.id).append(round_, slot, version, batch,
                                                       compress=job.compress)
    t3 = time.monotonic()
    return RolloutResult(steps=len(batch["obs"]), version=version, entry=entry,
                         episodes=episodes, weights_fetched=fetched, fetch_s=t1 - t0,
                         rollout_s=t2 - t1, write_s=t3 - t2, bytes=nbytes, envs_started=started,
                         env_backend=job.env_backend).model_dump(mode="json")


def explore(call: ExploreArgs, r: Any, state: _Job, version: int, fetched: bool,
            fetch_s: float) -> ExploreResult:
    job, cfg, slot, spec = call.job, call.job.hyperparameters, call.slot, state.spec
    t1 = time.monotonic()
    started = slot not in state.explorers
    if started:
        seed = training_seed(job.seed, slot, 0)
        envs = make_vec_env(job.env_id, job.envs_per_actor, seed, env=job.env,
                            gamma=cfg.gamma, normalize_reward=False, backend=job.env_backend)
        state.explorers[slot] = (Explorer(envs, n_step=cfg.n_step, gamma=cfg.gamma),
                                 torch.Generator().manual_seed(seed))
    explorer, generator = state.explorers[slot]

    def act(obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(np.asarray(obs, dtype=spec.obs_dtype))
        return state.module.act(state.policy, x, cfg, slot=slot, actors=call.actors,
                                generator=generator).numpy()

    try:
        transitions, episodes = explorer.collect(act, job.steps_per_actor)
    except Exception:  # an env that failed mid-round: a retry starts the slot's envs afresh
        del state.explorers[slot]
        raise
    steps = job.steps_per_actor * job.envs_per_actor
    entry, nbytes, priority_mean = None, 0, None
    t2 = time.monotonic()
    if len(transitions):
        arrays = transitions.arrays(spec.obs_dtype, spec.action_dtype)
        priorities = state.module.priorities(
            state.policy, {k: torch.from_numpy(v) for k, v in arrays.items()}, cfg).numpy()
        arrays["priorities"] = priorities.astype(np.float32)
        priority_mean = float(priorities.mean())
        t2 = time.monotonic()
        entry, nbytes = TrajectoryStream(r, job.id).append(0, slot, version, arrays,
                                                           compress=job.compress)
    return ExploreResult(steps=steps, transitions=len(transitions), version=version,
                         entry=entry, episodes=episodes, priority_mean=priority_mean,
                         weights_fetched=fetched, fetch_s=fetch_s, rollout_s=t2 - t1,
                         write_s=time.monotonic() - t2, bytes=nbytes, envs_started=started,
                         env_backend=job.env_backend)
