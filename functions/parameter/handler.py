"""The parameter function: staleness-aware aggregation of asynchronous learners' gradients.

It stays warm and holds the policy, the Adam optimizer and the aggregation rule. Each ``step``
moves the gradients new in the job's gradient stream into its queue one at a time; after every
enqueue the rule (``faasrl.rl.aggregation``) says whether to aggregate the queue now. An
aggregation combines the queued gradients with the rule's weights, steps the optimizer, ticks
the clock and publishes the new policy as version = clock, committing weights, optimizer state,
the rule's state and the removal of the aggregated entries in one Redis transaction. ``flush``
ends a round: it aggregates whatever is queued, advances the rule (Stellaris' threshold decays,
round 0 fixes δ_max) and hands back the round's staleness figures.

Everything a restart needs is in Redis: the clock is the newest published version, the rule's
state and the round's figures are a JSON key, the queue is the stream's entries not yet
aggregated. A cold container (or one that lost track) rebuilds itself from them.

A workflow that replays a run pins what a step reads: ``gradients`` names the stream entries
to take, in that order (the learners' end events it released; the stream may hold others
already), and ``in_flight`` the clocks of the learners still computing, which SSP's rule
reads instead of the learner registry. The queue's entry ids are then part of the JSON key,
which a cold container takes again first.

The Adam choice (the spec's Eq. 4 under Adam): ``optimizer_step: per_gradient`` (the default,
as the authors' code applies gradients) takes each queued gradient as its own Adam step with lr
α_0·w_j, w_j = α_j/α_0 the rule's weight (the clock still ticks once per aggregation); a
uniform scale of the gradient cancels in Adam's update, so ``weighted_mean`` applies one Adam
step with lr α_0 to (1/H) Σ w_j g_j, where only the relative weights act.

    args: faasrl.contracts.StepArgs | FlushArgs (``mode``: step | flush)
    result: StepResult | FlushResult

The learning rate is the job's algorithm's (``learning_rate``, annealed over ``total_rounds``
when ``anneal_lr``).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from typing import Any

import torch

from faasrl.algorithms import algorithm, annealed_lr
from faasrl.contracts import (
    PARAMETER_ARGS,
    FlushArgs,
    FlushResult,
    JobContext,
    StepArgs,
    StepResult,
    parse,
)
from faasrl.data.connection import function_redis
from faasrl.data.gradients import Gradient, GradientStream, LearnerRegistry
from faasrl.data.keys import parameter_state_key
from faasrl.data.params import ParameterStore
from faasrl.rl.aggregation import AggregationRule, build_rule, combine
from faasrl.rl.model_card import model_card
from faasrl.rl.policy import PolicySpec

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
OBS_STATS = ("obs_stats.mean", "obs_stats.var", "obs_stats.count")
_servers: dict[str, _Server] = {}


def _fresh_round() -> dict[str, Any]:
    return {"staleness": [], "dropped": 0, "aggregations": 0, "reasons": {}}


class _Server:
    """One job's parameter server, as a warm container holds it."""

    def __init__(self, call: StepArgs, store: ParameterStore):
        job = call.job
        r = self.redis = _redis(job)
        self.job = job.id
        module = algorithm(job.hyperparameters.algorithm)
        self.model = module.make_model(PolicySpec.from_dict(job.policy_spec()),
                                       job.hyperparameters).to(DEVICE)
        self.clock = store.latest()
        weights, _ = store.load(self.clock)
        self.model.load_state_dict(weights)
        self.optimizer = module.make_optimizer(self.model, job.hyperparameters)
        saved = store.load_optimizer()
        if saved is not None and saved[1] == self.clock:
            self.optimizer.load_state_dict(saved[0])
        self.rule = _rule(call)
        raw = r.get(parameter_state_key(self.job))
        state = json.loads(raw) if raw else {}
        self.rule.load_state_dict(state.get("rule", {}))
        self.round_stats = state.get("round_stats") or _fresh_round()
        self.queue: list[Gradient] = []
        self.cursor: str | None = None  # the last stream entry this server has seen
        # A workflow that names the gradients: the entries a lost container had queued, which
        # the next step takes again before its own (the stream holds others not yet named).
        self.pending: list[str] = state.get("queue", [])
        self.session = call.session
        self.written: str | None = state.get("written")  # the state it last saved, or read

    def state_json(self) -> str:
        """The state to save, marked as this server's newest (``_server`` compares)."""
        self.written = uuid.uuid4().hex
        return json.dumps({"rule": self.rule.state_dict(), "round_stats": self.round_stats,
                           "clock": self.clock, "queue": [g.entry_id for g in self.queue],
                           "written": self.written})


def _redis(job: JobContext) -> Any:
    return function_redis(job.model_dump(include={"redis"}))


def _rule(call: StepArgs) -> AggregationRule:
    return build_rule(call.aggregation.rule, **call.aggregation.model_dump(exclude={"rule"}))


def _server(call: StepArgs, store: ParameterStore, r: Any) -> _Server:
    """The warm server, unless another container saved state since (a step that queued or
    dropped a gradient without publishing changes the queue and the rule, not the clock) or
    the job was restarted (a new driver session): then it is rebuilt from Redis."""
    server = _servers.get(call.job.id)
    if server is None or server.session != call.session or server.clock != store.latest() or \
            server.written != json.loads(r.get(parameter_state_key(call.job.id)) or "{}"
                                         ).get("written"):
        server = _servers[call.job.id] = _Server(call, store)
    return server


def _aggregate(server: _Server, store: ParameterStore, stream: GradientStream,
               call: StepArgs, reason: str) -> None:
    queue, server.queue = server.queue, []
    staleness = [server.clock - g.clock for g in queue]
    weights = server.rule.weights(staleness)
    lr = annealed_lr(call.job.hyperparameters, call.round, call.total_rounds)
    params = dict(server.model.named_parameters())
    grads = [{k: v.to(DEVICE) for k, v in g.tensors.items() if k in params} for g in queue]
    if call.optimizer_step == "per_gradient":
        steps = [(g, lr * w) for g, w in zip(grads, weights, strict=True)]
    else:
        steps = [(combine(grads, weights), lr)]
    for grad, step_lr in steps:
        for group in server.optimizer.param_groups:
            group["lr"] = step_lr
        for name, p in params.items():
            p.grad = grad[name].to(p.dtype) if name in grad else None
        server.optimizer.step()
    server.optimizer.zero_grad(set_to_none=True)
    for g in queue:  # observation statistics the learners saw (MuJoCo)
        if all(k in g.tensors for k in OBS_STATS):
            server.model.merge_obs_stats(*(g.tensors[k] for k in OBS_STATS))
    server.clock += 1
    server.rule.aggregated(staleness)
    stats = server.round_stats
    stats["staleness"].extend(staleness)
    stats["aggregations"] += 1
    stats["reasons"][reason] = stats["reasons"].get(reason, 0) + 1
    store.publish(server.clock, server.model.state_dict(),
                  model_card(server.model, env_id=call.job.env_id,
                             algorithm=call.job.hyperparameters.algorithm, env=call.job.env,
                             description=call.job.env_description),
                  optimizer=server.optimizer.state_dict(),
                  also=lambda pipe: (stream.delete([g.entry_id for g in queue], pipe),
                                     pipe.set(parameter_state_key(server.job),
                                              server.state_json())))


def _drop(server: _Server, stream: GradientStream, entry_id: str) -> None:
    server.round_stats["dropped"] += 1
    with server.redis.pipeline() as pipe:
        stream.delete([entry_id], pipe)
        pipe.set(parameter_state_key(server.job), server.state_json())
        pipe.execute()


def _finite(g: Gradient, names: set[str]) -> str | None:
    missing = names - set(g.tensors)
    if missing:
        return f"gradient lacks {sorted(missing)[:3]}"
    if not all(torch.isfinite(t).all() for t in g.tensors.values()):
        return "gradient contains NaN or infinity"
    return None


def step(server: _Server, store: ParameterStore, stream: GradientStream,
         call: StepArgs) -> None:
    """Enqueue the gradients, one at a time, aggregating whenever the rule says so: those
    ``call.gradients`` names, in that order, else every entry new in the stream.

    Named gradients leave the cursor alone, and the queue is saved with the state: the stream
    cannot tell queued entries from those not named yet. A retried step skips what its first
    try took: entries gone from the stream (aggregated, dropped) and entries still queued."""
    names = {name for name, _ in server.model.named_parameters()}
    if call.gradients is not None:
        queued = {g.entry_id for g in server.queue}
        ids = [i for i in dict.fromkeys([*server.pending, *call.gradients]) if i not in queued]
        server.pending = []
        for entry in stream.read_ids(ids):
            _take(server, store, stream, call, names, entry)
        if server.queue:
            server.redis.set(parameter_state_key(server.job), server.state_json())
        return
    while entries := stream.read(after=server.cursor):
        for entry in entries:
            server.cursor = _entry_id(entry)
            _take(server, store, stream, call, names, entry)


def _entry_id(entry: Gradient | tuple[str, str]) -> str:
    return entry[0] if isinstance(entry, tuple) else entry.entry_id


def _take(server: _Server, store: ParameterStore, stream: GradientStream, call: StepArgs,
          names: set[str], entry: Gradient | tuple[str, str]) -> None:
    """Drop the entry or enqueue it, then aggregate if the rule says so."""
    if isinstance(entry, tuple) or _finite(entry, names) is not None or \
            not server.rule.admit(server.clock - entry.clock):
        _drop(server, stream, _entry_id(entry))
        return
    server.queue.append(entry)
    # What learners still computing would be at after one more aggregation (SSP).
    clocks = LearnerRegistry(server.redis, server.job).clocks().values() \
        if call.in_flight is None else call.in_flight
    in_flight = [server.clock + 1 - c for c in clocks]
    reason = server.rule.ready([server.clock - g.clock for g in server.queue],
                               learners=call.learners, in_flight=in_flight)
    if reason is not None:
        _aggregate(server, store, stream, call, reason)


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    t0 = time.monotonic()
    call = parse(PARAMETER_ARGS, args, "parameter args")
    r = _redis(call.job)
    store = ParameterStore(r, call.job.id, keep=call.keep)
    stream = GradientStream(r, call.job.id)
    server = _server(call, store, r)
    server.redis = r  # the job's credentials of this invocation
    before = server.clock
    step(server, store, stream, call)
    if not isinstance(call, FlushArgs):
        return StepResult(clock=server.clock, aggregations=server.clock - before,
                          queued=len(server.queue), run_s=time.monotonic() - t0
                          ).model_dump(mode="json")
    queued = len(server.queue)
    if server.queue:
        _aggregate(server, store, stream, call, "round end")
    stats = server.round_stats
    staleness = stats["staleness"]
    threshold = server.rule.threshold()
    server.rule.end_round()
    server.round_stats = _fresh_round()
    r.set(parameter_state_key(server.job), server.state_json())
    return FlushResult(
        clock=server.clock, aggregations=server.clock - before, queued=queued,
        round_aggregations=stats["aggregations"], gradients_aggregated=len(staleness),
        gradients_dropped=stats["dropped"], reasons=stats["reasons"],
        staleness_mean=statistics.fmean(staleness) if staleness else None,
        staleness_max=max(staleness) if staleness else None, threshold=threshold,
        next_threshold=server.rule.threshold(), state={"rule": server.rule.state_dict()},
        run_s=time.monotonic() - t0).model_dump(mode="json")
