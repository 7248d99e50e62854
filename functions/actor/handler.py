"""The actor function: rolls out a job's policy in envs kept warm in this container.

Per invocation it fetches the weights of the version it is given (only when that version is not
the one it already holds), steps its envs for one round, writes one safetensors blob to the job's
trajectory stream in Redis and returns a small JSON summary. Envs live per (job, slot), so
episodes continue across rounds as long as the slot keeps landing on this container; a slot new
to this container starts fresh envs seeded from (job seed, slot, round).

    args: {mode: "rollout", job, round, slot, version}
          {mode: "evaluate", job, version, episodes, seed}

A ``version`` of null means the newest one published (asynchronous training: an actor samples
with the newest policy it sees). ``job.sequences`` adds rewards, episode ends and the last
observation to the batch (what V-trace needs). The summary names the batch's stream entry, the
key a learner is handed.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any

import torch

from faasrl.cache.connection import function_redis
from faasrl.cache.params import ParameterStore
from faasrl.cache.trajectories import TrajectoryStream
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.rollout import Rollout, evaluate

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
_jobs: OrderedDict[str, _Job] = OrderedDict()
MAX_JOBS = 2  # jobs whose envs and policy one warm container keeps


class _Job:
    def __init__(self, job: dict[str, Any]):
        self.policy = ActorCritic(PolicySpec.from_dict(job["policy"]))
        self.policy.eval()
        self.version: int | None = None
        self.rollouts: dict[int, Rollout] = {}


def _job(job: dict[str, Any]) -> _Job:
    if job["id"] not in _jobs:
        _jobs[job["id"]] = _Job(job)
        while len(_jobs) > MAX_JOBS:
            _jobs.popitem(last=False)
    _jobs.move_to_end(job["id"])
    return _jobs[job["id"]]


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    job = args["job"]
    r = function_redis(job)
    store = ParameterStore(r, job["id"])
    state = _job(job)
    t0 = time.monotonic()
    version = store.latest() if args.get("version") is None else int(args["version"])
    fetched = state.version != version
    if fetched:
        weights, _ = store.load(version)
        state.policy.load_state_dict(weights)
        state.version = version
    t1 = time.monotonic()

    if args.get("mode") == "evaluate":
        returns = evaluate(state.policy, job["env_id"], episodes=int(args["episodes"]),
                           seed=int(args["seed"]))
        return {"returns": [float(x) for x in returns], "version": version}

    slot, round_ = int(args["slot"]), int(args["round"])
    rollout = state.rollouts.get(slot)
    if rollout is None:
        seed = job["seed"] * 1_000_003 + slot * 10_007 + round_
        envs = make_vec_env(job["env_id"], job["envs"], seed, gamma=job["gamma"])
        rollout = state.rollouts[slot] = Rollout(
            envs, state.policy, num_steps=job["steps"], gamma=job["gamma"],
            gae_lambda=job["gae_lambda"], seed=seed, sequences=bool(job.get("sequences")))
    batch, episodes = rollout.collect()
    t2 = time.monotonic()
    entry, nbytes = TrajectoryStream(r, job["id"]).append(round_, slot, version, batch,
                                                          compress=bool(job.get("compress")))
    t3 = time.monotonic()
    return {"steps": len(batch["obs"]), "version": version, "entry": entry,
            "episodes": [[float(ret), int(length)] for ret, length in episodes],
            "weights_fetched": fetched, "fetch_s": t1 - t0, "rollout_s": t2 - t1,
            "write_s": t3 - t2, "bytes": nbytes}
