"""The learner function: the job's algorithm's learner step, kept warm between invocations.

In ``update`` mode (synchronous rounds) it runs one update on the round's trajectories. It keeps
the model and its optimizer warm between rounds, and loads both from Redis when this container
has not seen the job's current version (a cold start, or another container did the last
update). The round's batches are acknowledged only after the new version is published, so a
learner that dies mid-update loses no data. Uses CUDA when the container has a GPU.

    args: faasrl.contracts.InitArgs | UpdateArgs | GradientArgs | TrainArgs (``mode``)
    result: InitResult (builds the seeded initial policy, publishes version 0) | UpdateResult
            | GradientResult (asynchronous training: one gradient, pushed to the stream)
            | TrainResult (off-policy: gradient steps on sampled batches)

Every update also reports ``policy_kl``, the KL between the new and the old policy on the batch
(MinionsRL's state). Controllers that ask get more: ``hessian`` (Nitro: the extreme eigenvalues
of the surrogate's Hessian on the new policy, with their compute time) and ``gns`` (KungFu: the
gradient noise scale of the algorithm's loss on the batch before the update).

In ``train`` mode (off-policy training) it reads the batches the buffer function sampled, has
the algorithm take a gradient step on each (DQN, SAC), and in one transaction publishes the new
version (target networks included), its optimizer, its result and the new |δ| of every sampled
transition, which the buffer applies before it samples again.

In ``gradient`` mode (asynchronous training) the learner does not step: it takes the newest
published policy (its clock), registers it so that concurrent learners can compute the
cross-learner ratios, has the algorithm compute one gradient on the slice it was handed (env
columns of some batches: PPO with Stellaris's truncation, IMPACT with V-trace against a target
network), and pushes (gradient, clock, learner slot) to the job's gradient stream for the
parameter function. It leaves the batches in the stream: later passes train on them again, and
the workflow drops them at the round's end. A workflow that replays a run pins what the learner
reads instead: ``version`` (the policy to compute on) and ``peers`` (the other learners' slots
and versions, whose published weights give the ratios; the registry is then neither read nor
written). A pinned version that is no longer kept is refused (``InvalidArgs`` naming it).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import torch

from faasrl.algorithms import LearnerContext, algorithm, annealed_lr
from faasrl.contracts import (
    LEARNER_ARGS,
    ContractError,
    GradientArgs,
    GradientResult,
    InitArgs,
    InitResult,
    JobContext,
    TrainArgs,
    TrainResult,
    UpdateArgs,
    UpdateResult,
    parse,
)
from faasrl.data.codec import decode_arrays, encode_arrays
from faasrl.data.connection import function_redis
from faasrl.data.gradients import GradientStream, LearnerRegistry
from faasrl.data.keys import env_code_key, priorities_key, update_key
from faasrl.data.params import MissingVersion, ParameterStore
from faasrl.data.trajectories import Batch, TrajectorySchema, TrajectoryStream
from faasrl.rl.diagnostics import action_distributions, gradient_noise_scale, mean_policy_kl
from faasrl.rl.env_loader import ensure
from faasrl.rl.hessian import surrogate_hessian_extremes
from faasrl.rl.model_card import model_card
from faasrl.rl.policy import PolicySpec, obs_batch_stats, policy_spec_for, policy_spec_from
from faasrl.rl.seeds import update_seed
from faasrl.runtime.invalid import InvalidArgs

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
_learners: dict[str, _Learner] = {}
CACHED_VERSIONS = 8  # published versions a gradient learner keeps decoded: its own, peers'
R = TypeVar("R", UpdateResult, TrainResult)


class _Learner:
    """A job's model and optimizer, as its algorithm builds them, kept warm (``spec``: the
    model's, its network included)."""

    def __init__(self, job: JobContext, module: ModuleType):
        self.model = module.make_model(PolicySpec.from_dict(job.policy_spec()),
                                       job.hyperparameters).to(DEVICE)
        self.spec: PolicySpec = self.model.spec
        self.optimizer = module.make_optimizer(self.model, job.hyperparameters)
        self.version: int | None = None


def _metadata(job: JobContext, model: torch.nn.Module) -> dict[str, str]:
    """What a published version says about itself (rl/model_card.py)."""
    return model_card(model, env_id=job.env_id, algorithm=job.hyperparameters.algorithm,
                      env=job.env, description=job.env_description)


def _policy_spec(job: JobContext) -> PolicySpec:
    """The job's default policy: from what the submit's probe found (no env built here), or,
    for a job stored before probes, by building its env."""
    if job.env_description is not None:
        return policy_spec_from(job.env_description)
    ensure(job.env, lambda: _redis(job).get(env_code_key(job.id)))
    return policy_spec_for(job.env_id, job.env)


def _redis(job: JobContext) -> Any:
    return function_redis(job.model_dump(include={"redis"}))


def _tensors(batches: Sequence[Batch], keys: Sequence[str]) -> dict[str, torch.Tensor]:
    """The batches' arrays of ``keys``, concatenated along the rows, on the device."""
    return {k: torch.as_tensor(np.concatenate([b.arrays[k] for b in batches])).to(DEVICE)
            for k in keys}


def init(call: InitArgs, store: ParameterStore) -> InitResult:
    job, cfg = call.job, call.job.hyperparameters
    module = algorithm(cfg.algorithm)
    spec = _policy_spec(job)
    torch.manual_seed(job.seed)
    model = module.make_model(spec, cfg)
    store.publish(0, model.state_dict(), _metadata(job, model))
    return InitResult(policy=model.spec.to_dict(), version=0,
                      parameters=sum(p.numel() for p in model.parameters()),
                      algorithm_state=algorithm(job.hyperparameters.algorithm)
                      .initial_state(job.hyperparameters))


def _warm(job: JobContext, module: ModuleType, store: ParameterStore, version: int
          ) -> _Learner:
    """The job's learner at ``version``: kept from the last call, else loaded from Redis."""
    learner = _learners.get(job.id)
    if learner is None:
        learner = _learners[job.id] = _Learner(job, module)
    if learner.version != version:
        learner.optimizer = _load_version(
            store, version, learner.model,
            lambda: module.make_optimizer(learner.model, job.hyperparameters))
        learner.version = version
    return learner


def _load_version(store: ParameterStore, version: int, model: torch.nn.Module,
                  fresh: Callable[[], Any]) -> Any:
    """Put ``version``'s weights into ``model``; returns ``fresh()``, an optimizer, with the
    state stored for that version when there is one (else it starts afresh)."""
    weights, _ = store.load(version)
    model.load_state_dict(weights)
    optimizer = fresh()
    saved = store.load_optimizer()
    if saved is not None and saved[1] == version:
        optimizer.load_state_dict(saved[0])
    return optimizer


class _GradientLearner:
    """A job's networks in a warm learner container: the current policy, a second one for
    peers' and target policies, and the published versions it decoded last (a version's
    weights never change, and one container computes many gradients on a few versions)."""

    def __init__(self, job: JobContext, module: ModuleType):
        spec, cfg = PolicySpec.from_dict(job.policy_spec()), job.hyperparameters
        self.model = module.make_model(spec, cfg).to(DEVICE)
        self.other = module.make_model(spec, cfg).to(DEVICE)
        self.spec: PolicySpec = self.model.spec
        self.version: int | None = None
        self._published: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()

    def published(self, store: ParameterStore, version: int) -> dict[str, torch.Tensor]:
        """``version``'s weights (raises :class:`MissingVersion` once it is evicted)."""
        if version in self._published:
            self._published.move_to_end(version)
        else:
            self._published[version] = store.load(version)[0]
            if len(self._published) > CACHED_VERSIONS:
                self._published.popitem(last=False)
        return self._published[version]

    def published_or_none(self, store: ParameterStore, version: int
                          ) -> dict[str, torch.Tensor] | None:
        try:
            return self.published(store, version)
        except MissingVersion:  # evicted
            return None


_gradient_learners: dict[str, _GradientLearner] = {}


def _pinned(learner: _GradientLearner, store: ParameterStore, version: int, field: str
            ) -> dict[str, torch.Tensor]:
    """A version the workflow named in ``field``: one that is no longer kept is refused."""
    try:
        return learner.published(store, version)
    except MissingVersion:
        raise InvalidArgs(field, f"version {version} is no longer kept (the newest is "
                                 f"{store.latest()})") from None


def _peers(call: GradientArgs, learner: _GradientLearner, store: ParameterStore,
           registry: LearnerRegistry, clock: int) -> list[dict[str, torch.Tensor]]:
    """The other learners' weights, in slot order, less those on ``clock`` (the same ratios
    as the learner's own): the versions ``call.peers`` names, else the registry's."""
    if call.peers is None:
        return [p.weights for p in registry.peers(call.slot, skip_clock=clock)]
    return [_pinned(learner, store, c, f"peers.{s}") for s, c in sorted(call.peers.items())
            if s != call.slot and c != clock]


def _env_columns(batch: dict[str, torch.Tensor], schema: TrajectorySchema, envs: int,
                 span: tuple[int, int] | None) -> dict[str, torch.Tensor]:
    """The env columns [start, stop) of a time-major batch (``span`` None: all of them): whole
    env trajectories, per-step rows t·envs + e and per-env rows e."""
    if span is None or span == (0, envs):
        return batch
    start, stop = span
    return {k: v[start:stop] if k in schema.env_fields
            else v.reshape(-1, envs, *v.shape[1:])[:, start:stop].reshape(-1, *v.shape[1:])
            for k, v in batch.items()}


def gradient(call: GradientArgs, store: ParameterStore) -> GradientResult:
    job, slot, cfg = call.job, call.slot, call.job.hyperparameters
    module = _algorithm(job, "async")
    r = _redis(job)
    learner = _gradient_learners.get(job.id)
    if learner is None:
        learner = _gradient_learners[job.id] = _GradientLearner(job, module)
    spec = learner.spec
    t0 = time.monotonic()
    if call.version is None:
        clock = store.latest()
        weights = learner.published(store, clock)
    else:
        clock = call.version
        weights = _pinned(learner, store, clock, "version")
    if learner.version != clock:
        learner.model.load_state_dict(weights)
        learner.version = clock
    registry = LearnerRegistry(r, job.id)
    if call.peers is None:  # pinned peers read no registry: nobody reads this learner's entry
        registry.register(slot, clock, weights)
    try:
        schema: TrajectorySchema = module.batch_schema(spec, job.envs_per_actor)
        stream = TrajectoryStream(r, job.id)
        batches, rejected = stream.read_entries(call.entries, schema)
        out = GradientResult(clock=clock, pushed=False, samples=0,
                             rejected=[x.to_dict() for x in rejected])
        if not batches:
            registry.unregister(slot)
            return out
        spans = dict(zip(call.entries, call.envs, strict=True)) if call.envs else {}
        data = [_env_columns(_tensors([b], [*schema.fields, *schema.env_fields]), schema,
                             job.envs_per_actor, spans.get(b.entry_id)) for b in batches]
        t1 = time.monotonic()
        context = LearnerContext(
            model=learner.model, other=learner.other, clock=clock,
            peers=lambda: _peers(call, learner, store, registry, clock),
            version=lambda v: learner.published_or_none(store, v))
        tensors, stats = module.gradient(context, data, cfg)
        if spec.normalize_obs:  # the parameter function merges what this learner saw
            mean, var, n = obs_batch_stats(torch.cat([d["obs"] for d in data]), spec.obs_shape)
            tensors.update({"obs_stats.mean": mean, "obs_stats.var": var,
                            "obs_stats.count": torch.tensor(float(n), dtype=torch.float64)})
        t2 = time.monotonic()
        entry, nbytes = GradientStream(r, job.id).push(slot, clock, tensors, stats)
    except BaseException:
        registry.unregister(slot)
        raise
    t3 = time.monotonic()
    lags = [clock - b.version for b in batches]
    return out.model_copy(update={
        "stats": stats, "pushed": True, "entry": entry,
        "samples": sum(len(d["obs"]) for d in data), "policy_lag": sum(lags) / len(lags),
        "read_s": t1 - t0, "compute_s": t2 - t1, "push_s": t3 - t2, "bytes": nbytes,
        "device": str(DEVICE)})


def _algorithm(job: JobContext, execution: str) -> ModuleType:
    module = algorithm(job.hyperparameters.algorithm)
    if execution not in module.EXECUTIONS:
        raise ContractError(f"job.hyperparameters.algorithm: {module.NAME} does not run "
                            f"{execution}")
    return module


def update(call: UpdateArgs, store: ParameterStore) -> UpdateResult:
    job, round_, version, cfg = call.job, call.round, call.version, call.job.hyperparameters
    module = _algorithm(job, "sync")
    r = _redis(job)
    if (done := _published(r, job, store, version)) is not None:
        return done
    learner = _warm(job, module, store, version)
    spec = learner.spec
    schema: TrajectorySchema = module.batch_schema(spec, job.envs_per_actor)
    stream = TrajectoryStream(r, job.id)

    t0 = time.monotonic()
    batches, rejected = stream.read_round(round_, call.slots, schema, timeout_s=30)
    if not batches:
        reasons = "; ".join(x.reason for x in rejected) or "none arrived"
        raise RuntimeError(f"round {round_}: no valid trajectories ({reasons})")
    data = _tensors(batches, list(schema.fields))
    t1 = time.monotonic()

    generator = torch.Generator().manual_seed(update_seed(job.seed, round_))
    gns = None
    if call.gns:
        gns = gradient_noise_scale(learner.model, data,
                                   lambda part: module.loss(learner.model, part, cfg)[0],
                                   parts=call.gns.parts,
                                   generator=torch.Generator().manual_seed(round_))
    before = action_distributions(learner.model, data["obs"])
    lr = annealed_lr(cfg, round_, call.total_rounds)
    stats, state = module.update(learner.model, learner.optimizer, data, cfg,
                                 generator=generator, lr=lr, state=call.algorithm_state)
    if spec.normalize_obs:  # after the update: the batch was collected under the old stats
        learner.model.update_obs_stats(data["obs"])
    policy_kl = mean_policy_kl(action_distributions(learner.model, data["obs"]), before)
    hessian = None
    if call.hessian:  # on the new policy, which the next round's actors will run
        hessian = surrogate_hessian_extremes(
            learner.model, data, samples=call.hessian.samples,
            iterations=call.hessian.iterations,
            generator=torch.Generator().manual_seed(update_seed(job.seed, round_)))
    t2 = time.monotonic()

    out = UpdateResult(version=version + 1, stats=stats, algorithm_state=state,
                       policy_kl=policy_kl, hessian=hessian, gns=gns,
                       samples=len(data["obs"]), rejected=[x.to_dict() for x in rejected],
                       read_s=t1 - t0, update_s=t2 - t1, device=str(DEVICE))
    # One transaction: the weights, the optimizer, this result and the acknowledgement of the
    # batches, so that a learner invoked again finds either all of them or none.
    store.publish(version + 1, learner.model.state_dict(), _metadata(job, learner.model),
                  optimizer=learner.optimizer.state_dict(),
                  also=lambda pipe: (pipe.set(update_key(job.id), out.model_dump_json()),
                                     stream.ack(batches, pipe)))
    learner.version = version + 1
    return out.model_copy(update={"publish_s": time.monotonic() - t2})


def _published(r: Any, job: JobContext, store: ParameterStore, version: int,
               contract: type[R] = UpdateResult) -> R | None:
    """The result of this update when a learner already published it (an invocation retried
    after its answer was lost); None when it is still to be done."""
    latest = store.latest()
    if latest is None or latest <= version:
        return None
    raw = r.get(update_key(job.id))
    done = contract.model_validate_json(raw) if raw else None
    if done is None or done.version != version + 1:
        raise RuntimeError(f"update of version {version}: version {latest} is already "
                           "published, by another run of this job")
    return done.model_copy(update={"replayed": True})


def train(call: TrainArgs, store: ParameterStore) -> TrainResult:
    job, version, cfg = call.job, call.version, call.job.hyperparameters
    module = _algorithm(job, "offpolicy")
    r = _redis(job)
    if call.keep is not None:  # a virtual clock's actors may still read older versions
        store = ParameterStore(r, job.id, keep=call.keep)
    learner = _learners.get(job.id)
    # A learner warm at this version published nothing newer (one learner runs per job):
    # only a cold or stale one checks whether this call was answered before (a round trip).
    if (learner is None or learner.version != version) and \
            (done := _published(r, job, store, version, TrainResult)) is not None:
        return done
    learner = _warm(job, module, store, version)
    t0 = time.monotonic()
    raw = r.get(call.sample)
    if raw is None:
        raise RuntimeError(f"sampled batches {call.sample}: gone (expired or never written)")
    arrays, _ = decode_arrays(raw)
    rows = len(arrays["slots"])
    data = {k: torch.as_tensor(v).to(DEVICE) for k, v in arrays.items()
            if k not in ("slots", "generations")}
    batches = [{k: v[i:i + cfg.batch_size] for k, v in data.items()}
               for i in range(0, rows, cfg.batch_size)]
    t1 = time.monotonic()
    learner.model.train()
    stats, state, new = module.train(learner.model, learner.optimizer, batches, cfg,
                                     call.algorithm_state)
    t2 = time.monotonic()
    priorities = encode_arrays({"slots": arrays["slots"], "generations": arrays["generations"],
                                "priorities": new.detach().cpu().numpy().astype(np.float32)})
    out = TrainResult(version=version + 1, stats=stats, algorithm_state=state,
                      priorities=priorities_key(job.id, version + 1), steps=len(batches),
                      samples=rows, bytes=len(raw), read_s=t1 - t0, update_s=t2 - t1,
                      publish_s=0.0, device=str(DEVICE))
    # One transaction, as in update mode: a retried call finds all of it or none.
    store.publish(version + 1, learner.model.state_dict(),
                  _metadata(job, learner.model),
                  optimizer=learner.optimizer.state_dict() if call.save_optimizer else None,
                  also=lambda pipe: (pipe.set(update_key(job.id), out.model_dump_json()),
                                     pipe.set(out.priorities, priorities, ex=600),
                                     pipe.delete(call.sample)))
    learner.version = version + 1
    return out.model_copy(update={"publish_s": time.monotonic() - t2})


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    call = parse(LEARNER_ARGS, args, "learner args")
    store = ParameterStore(_redis(call.job), call.job.id)
    if isinstance(call, InitArgs):
        out: InitResult | UpdateResult | GradientResult | TrainResult = init(call, store)
    elif isinstance(call, GradientArgs):
        out = gradient(call, store)
    elif isinstance(call, TrainArgs):
        out = train(call, store)
    else:
        out = update(call, store)
    return out.model_dump(mode="json")
