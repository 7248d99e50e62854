"""The learner function: one PPO update per round on that round's trajectories.

It keeps the model and its optimizer warm between rounds, and loads both from Redis when this
container has not seen the job's current version (a cold start, or another container did the
last update). The round's batches are acknowledged only after the new version is published, so a
learner that dies mid-update loses no data. Uses CUDA when the container has a GPU.

    args: {mode: "init", job}  -> builds the seeded initial policy, publishes version 0
          {mode: "update", job, round, version, slots, hyperparameters, kl_coef, total_rounds,
           hessian?: {samples, iterations}, gns?: {parts}}
          {mode: "gradient", job, slot, entries, algorithm, hyperparameters, truncation, rho,
           impact, target_lag}  -> asynchronous training: one gradient, pushed to the stream

Every update also reports ``policy_kl``, the KL between the new and the old policy on the batch
(MinionsRL's state). Controllers that ask get more: ``hessian`` (Nitro: the extreme eigenvalues
of the surrogate's Hessian on the new policy, with their compute time) and ``gns`` (KungFu: the
gradient noise scale of the batch before the update).

In ``gradient`` mode (asynchronous training) the learner does not step: it takes the newest
published policy (its clock), registers it so that concurrent learners can compute the
cross-learner ratios, computes one gradient on the batches it was handed (PPO with Stellaris's
truncation, or IMPACT with V-trace against a target network ``target_lag`` versions older), and
pushes (gradient, clock, learner slot) to the job's gradient stream for the parameter function.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import torch

from faasrl.cache.connection import function_redis
from faasrl.cache.gradients import GradientStream, LearnerRegistry
from faasrl.cache.keys import update_key
from faasrl.cache.params import MissingVersion, ParameterStore
from faasrl.cache.trajectories import TrajectorySchema, TrajectoryStream
from faasrl.rl.aggregation import combine
from faasrl.rl.diagnostics import action_distributions, gradient_noise_scale, mean_policy_kl
from faasrl.rl.hessian import surrogate_hessian_extremes
from faasrl.rl.impact import ImpactConfig, impact_gradient
from faasrl.rl.policy import ActorCritic, PolicySpec, obs_batch_stats, policy_spec_for
from faasrl.rl.ppo import PPOConfig, annealed_lr, ppo_gradient, ppo_update

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
KEYS = ("obs", "actions", "logprobs", "values", "advantages", "returns")
_learners: dict[str, _Learner] = {}


def _adam(model: torch.nn.Module, learning_rate: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=learning_rate, eps=1e-5)


class _Learner:
    def __init__(self, spec: PolicySpec, learning_rate: float):
        self.spec = spec
        self.model = ActorCritic(spec).to(DEVICE)
        self.optimizer = _adam(self.model, learning_rate)
        self.version: int | None = None


def _metadata(job: dict[str, Any], spec: PolicySpec) -> dict[str, str]:
    return {"env_id": job["env_id"], "policy": json.dumps(spec.to_dict())}


def init(job: dict[str, Any], store: ParameterStore) -> dict[str, Any]:
    spec = policy_spec_for(job["env_id"])
    torch.manual_seed(job["seed"])
    model = ActorCritic(spec)
    store.publish(0, model.state_dict(), _metadata(job, spec))
    return {"policy": spec.to_dict(), "version": 0,
            "parameters": sum(p.numel() for p in model.parameters())}


def _warm(job: dict[str, Any], cfg: PPOConfig, store: ParameterStore, version: int) -> _Learner:
    """The job's learner at ``version``: kept from the last round, else loaded from Redis."""
    learner = _learners.get(job["id"])
    if learner is None:
        learner = _learners[job["id"]] = _Learner(PolicySpec.from_dict(job["policy"]),
                                                  cfg.learning_rate)
    if learner.version != version:
        weights, _ = store.load(version)
        learner.model.load_state_dict(weights)
        saved = store.load_optimizer()
        if saved is not None and saved[1] == version:
            learner.optimizer.load_state_dict(saved[0])
        else:
            learner.optimizer = _adam(learner.model, cfg.learning_rate)
        learner.version = version
    return learner


class _GradientLearner:
    """A job's networks in a warm learner container: the current policy, a scratch copy for
    peers' and target policies."""

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        self.model = ActorCritic(spec).to(DEVICE)
        self.other = ActorCritic(spec).to(DEVICE)
        self.version: int | None = None


_gradient_learners: dict[str, _GradientLearner] = {}


def _logprobs(model: ActorCritic, weights: dict[str, torch.Tensor],
              data: dict[str, torch.Tensor]) -> torch.Tensor:
    model.load_state_dict(weights)
    with torch.no_grad():
        return model.get_action_and_value(data["obs"], data["actions"])[1]


def gradient(args: dict[str, Any], store: ParameterStore) -> dict[str, Any]:
    job, slot = args["job"], int(args["slot"])
    r = function_redis(job)
    learner = _gradient_learners.get(job["id"])
    if learner is None:
        learner = _gradient_learners[job["id"]] = _GradientLearner(
            PolicySpec.from_dict(job["policy"]))
    spec, impact = learner.spec, args["algorithm"] == "impact"
    t0 = time.monotonic()
    clock = store.latest()
    weights, _ = store.load(clock)
    if learner.version != clock:
        learner.model.load_state_dict(weights)
        learner.version = clock
    registry = LearnerRegistry(r, job["id"])
    registry.register(slot, clock, weights)
    try:
        schema = TrajectorySchema.for_policy(spec.obs_shape, spec.obs_dtype, spec.action_shape,
                                             spec.action_dtype,
                                             sequences_of=int(job["envs"]) if impact else 0)
        stream = TrajectoryStream(r, job["id"])
        batches, rejected = stream.read_entries(args["entries"], schema)
        out: dict[str, Any] = {"clock": clock, "pushed": False, "samples": 0,
                               "rejected": [x.to_dict() for x in rejected]}
        if not batches:
            registry.unregister(slot)
            return out
        keys = (*KEYS, *(("rewards", "ends") if impact else ()))
        data = {k: torch.as_tensor(np.concatenate([b.arrays[k] for b in batches])).to(DEVICE)
                for k in keys}
        t1 = time.monotonic()

        hp = args["hyperparameters"]
        if impact:
            cfg = ImpactConfig(gamma=hp["gamma"], clip_coef=hp["clip_coef"],
                               ent_coef=hp["ent_coef"], vf_coef=hp["vf_coef"],
                               kl_coef=hp["kl_coef"], max_grad_norm=hp["max_grad_norm"],
                               **args["impact"])
            try:  # the target network: the policy target_lag aggregations back
                target_weights, _ = store.load(max(0, clock - int(args.get("target_lag", 1))))
            except MissingVersion:  # already evicted: the current policy stands in
                target_weights = weights
            learner.other.load_state_dict(target_weights)
            grads, stats = [], {}
            for b in batches:  # V-trace runs along each batch's own time axis
                one = {k: torch.as_tensor(b.arrays[k]).to(DEVICE)
                       for k in (*keys, "last_obs")}
                g, stats = impact_gradient(learner.model, learner.other, one, cfg,
                                           num_envs=len(b.arrays["last_obs"]))
                grads.append(g)
            tensors = combine(grads, [1.0] * len(grads))
        else:
            peers = registry.peers(slot, skip_clock=clock)
            peer_logprobs = [_logprobs(learner.other, p.weights, data) for p in peers]
            cfg = PPOConfig(**hp)
            tensors, stats = ppo_gradient(learner.model, data, cfg, peer_logprobs=peer_logprobs,
                                          truncation=args.get("truncation", "paper"),
                                          rho=float(args.get("rho", 1.0)))
            stats["peers"] = len(peers)
        if spec.normalize_obs:  # the parameter function merges what this learner saw
            mean, var, n = obs_batch_stats(data["obs"], spec.obs_shape)
            tensors.update({"obs_stats.mean": mean, "obs_stats.var": var,
                            "obs_stats.count": torch.tensor(float(n), dtype=torch.float64)})
        t2 = time.monotonic()
        _, nbytes = GradientStream(r, job["id"]).push(slot, clock, tensors, stats)
    except BaseException:
        registry.unregister(slot)
        raise
    stream.delete([b.entry_id for b in batches])
    t3 = time.monotonic()
    lags = [clock - b.version for b in batches]
    return {**out, **stats, "pushed": True, "samples": len(data["obs"]),
            "policy_lag": sum(lags) / len(lags), "read_s": t1 - t0, "compute_s": t2 - t1,
            "push_s": t3 - t2, "bytes": nbytes, "device": str(DEVICE)}


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    job = args["job"]
    r = function_redis(job)
    store = ParameterStore(r, job["id"])
    if args["mode"] == "init":
        return init(job, store)
    if args["mode"] == "gradient":
        return gradient(args, store)

    round_, version = int(args["round"]), int(args["version"])
    if (done := _published(r, job, store, version)) is not None:
        return done
    cfg = PPOConfig(**args["hyperparameters"])
    cfg.kl_coef = float(args.get("kl_coef", cfg.kl_coef))
    learner = _warm(job, cfg, store, version)
    spec = learner.spec
    schema = TrajectorySchema.for_policy(spec.obs_shape, spec.obs_dtype, spec.action_shape,
                                         spec.action_dtype)
    stream = TrajectoryStream(r, job["id"])

    t0 = time.monotonic()
    batches, rejected = stream.read_round(round_, args["slots"], schema, timeout_s=30)
    if not batches:
        reasons = "; ".join(x.reason for x in rejected) or "none arrived"
        raise RuntimeError(f"round {round_}: no valid trajectories ({reasons})")
    data = {k: torch.as_tensor(np.concatenate([b.arrays[k] for b in batches])).to(DEVICE)
            for k in KEYS}
    t1 = time.monotonic()

    generator = torch.Generator().manual_seed(job["seed"] * 7919 + round_)
    extra: dict[str, Any] = {}
    if args.get("gns"):
        extra["gns"] = gradient_noise_scale(learner.model, data, cfg,
                                            parts=int(args["gns"]["parts"]),
                                            generator=torch.Generator().manual_seed(round_))
    before = action_distributions(learner.model, data["obs"])
    lr = annealed_lr(cfg, round_, args.get("total_rounds"))
    stats = ppo_update(learner.model, learner.optimizer, data, cfg, generator=generator, lr=lr)
    if spec.normalize_obs:  # after the update: the batch was collected under the old stats
        learner.model.update_obs_stats(data["obs"])
    extra["policy_kl"] = mean_policy_kl(action_distributions(learner.model, data["obs"]), before)
    if args.get("hessian"):  # on the new policy, which the next round's actors will run
        extra["hessian"] = surrogate_hessian_extremes(
            learner.model, data, samples=int(args["hessian"]["samples"]),
            iterations=int(args["hessian"]["iterations"]),
            generator=torch.Generator().manual_seed(job["seed"] * 7919 + round_))
    t2 = time.monotonic()

    out = {"version": version + 1, **stats, **extra, "samples": len(data["obs"]),
           "rejected": [x.to_dict() for x in rejected], "read_s": t1 - t0,
           "update_s": t2 - t1, "device": str(DEVICE)}
    # One transaction: the weights, the optimizer, this result and the acknowledgement of the
    # batches, so that a learner invoked again finds either all of them or none.
    store.publish(version + 1, learner.model.state_dict(), _metadata(job, spec),
                  optimizer=learner.optimizer.state_dict(),
                  also=lambda pipe: (pipe.set(update_key(job["id"]), json.dumps(out)),
                                     stream.ack(batches, pipe)))
    learner.version = version + 1
    return {**out, "publish_s": time.monotonic() - t2}


def _published(r: Any, job: dict[str, Any], store: ParameterStore, version: int
               ) -> dict[str, Any] | None:
    """The result of this update when a learner already published it (an invocation retried
    after its answer was lost); None when it is still to be done."""
    latest = store.latest()
    if latest is None or latest <= version:
        return None
    raw = r.get(update_key(job["id"]))
    done = json.loads(raw) if raw else None
    if done is None or int(done["version"]) != version + 1:
        raise RuntimeError(f"update of version {version}: version {latest} is already "
                           "published, by another run of this job")
    return {**done, "replayed": True}
