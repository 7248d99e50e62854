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

The Adam choice (the spec's Eq. 4 under Adam): a uniform scale of the gradient cancels in Adam's
update, so ``optimizer_step: weighted_mean`` (the default) applies one Adam step with lr α_0 to
(1/H) Σ w_j g_j, where only the rule's relative weights w_j = α_j/α_0 matter; ``per_gradient``
applies each queued gradient as its own Adam step with lr α_0·w_j (the clock still ticks once).

    args: {mode: "step" | "flush", job, round, session, hyperparameters: {learning_rate,
           anneal_lr}, total_rounds, aggregation: {rule, ...params}, optimizer_step, learners,
           keep}
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

import torch

from faasrl.cache.connection import function_redis
from faasrl.cache.gradients import Gradient, GradientStream, LearnerRegistry
from faasrl.cache.keys import parameter_state_key
from faasrl.cache.params import ParameterStore
from faasrl.rl.aggregation import AggregationRule, build_rule, combine
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.ppo import PPOConfig, annealed_lr

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
OBS_STATS = ("obs_stats.mean", "obs_stats.var", "obs_stats.count")
_servers: dict[str, _Server] = {}


def _fresh_round() -> dict[str, Any]:
    return {"staleness": [], "dropped": 0, "aggregations": 0, "reasons": {}}


class _Server:
    """One job's parameter server, as a warm container holds it."""

    def __init__(self, job: dict[str, Any], args: dict[str, Any], store: ParameterStore):
        r = self.redis = function_redis(job)
        self.job = job["id"]
        self.spec = PolicySpec.from_dict(job["policy"])
        self.model = ActorCritic(self.spec).to(DEVICE)
        self.clock = store.latest()
        weights, _ = store.load(self.clock)
        self.model.load_state_dict(weights)
        self.optimizer = torch.optim.Adam(self.model.parameters(),
                                          lr=args["hyperparameters"]["learning_rate"], eps=1e-5)
        saved = store.load_optimizer()
        if saved is not None and saved[1] == self.clock:
            self.optimizer.load_state_dict(saved[0])
        self.rule = _rule(args)
        raw = r.get(parameter_state_key(self.job))
        state = json.loads(raw) if raw else {}
        self.rule.load_state_dict(state.get("rule", {}))
        self.round_stats = state.get("round_stats") or _fresh_round()
        self.queue: list[Gradient] = []
        self.cursor: str | None = None  # the last stream entry this server has seen
        self.session = args.get("session")

    def state_json(self) -> str:
        return json.dumps({"rule": self.rule.state_dict(), "round_stats": self.round_stats,
                           "clock": self.clock})


def _rule(args: dict[str, Any]) -> AggregationRule:
    params = dict(args["aggregation"])
    return build_rule(params.pop("rule"), **params)


def _server(args: dict[str, Any], store: ParameterStore) -> _Server:
    """The warm server, unless another container published since or the job was restarted
    (a new driver session): then it is rebuilt from Redis."""
    job = args["job"]
    server = _servers.get(job["id"])
    if server is None or server.clock != store.latest() or server.session != args.get("session"):
        server = _servers[job["id"]] = _Server(job, args, store)
    return server


def _aggregate(server: _Server, store: ParameterStore, stream: GradientStream,
               args: dict[str, Any], reason: str) -> None:
    queue, server.queue = server.queue, []
    staleness = [server.clock - g.clock for g in queue]
    weights = server.rule.weights(staleness)
    hp = args["hyperparameters"]
    lr = annealed_lr(PPOConfig(learning_rate=hp["learning_rate"], anneal_lr=hp["anneal_lr"]),
                     int(args["round"]), args.get("total_rounds"))
    params = dict(server.model.named_parameters())
    grads = [{k: v.to(DEVICE) for k, v in g.tensors.items() if k in params} for g in queue]
    if args.get("optimizer_step", "weighted_mean") == "per_gradient":
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
                  {"env_id": args["job"]["env_id"], "policy": json.dumps(server.spec.to_dict())},
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
         args: dict[str, Any]) -> None:
    """Enqueue every new gradient, one at a time, aggregating whenever the rule says so."""
    learners = int(args["learners"])
    names = {name for name, _ in server.model.named_parameters()}
    while entries := stream.read(after=server.cursor):
        for entry in entries:
            server.cursor = entry[0] if isinstance(entry, tuple) else entry.entry_id
            if isinstance(entry, tuple):
                _drop(server, stream, entry[0])
                continue
            if _finite(entry, names) is not None or not server.rule.admit(
                    server.clock - entry.clock):
                _drop(server, stream, entry.entry_id)
                continue
            server.queue.append(entry)
            # What learners still computing would be at after one more aggregation (SSP).
            in_flight = [server.clock + 1 - c
                         for c in LearnerRegistry(server.redis, server.job).clocks().values()]
            reason = server.rule.ready([server.clock - g.clock for g in server.queue],
                                       learners=learners, in_flight=in_flight)
            if reason is not None:
                _aggregate(server, store, stream, args, reason)


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    t0 = time.monotonic()
    job = args["job"]
    r = function_redis(job)
    store = ParameterStore(r, job["id"], keep=int(args.get("keep", 8)))
    stream = GradientStream(r, job["id"])
    server = _server(args, store)
    server.redis = r  # the job's credentials of this invocation
    before = server.clock
    step(server, store, stream, args)
    out: dict[str, Any] = {"clock": server.clock, "aggregations": server.clock - before,
                           "queued": len(server.queue)}
    if args["mode"] == "flush":
        if server.queue:
            _aggregate(server, store, stream, args, "round end")
        stats = server.round_stats
        staleness = stats["staleness"]
        out.update({
            "clock": server.clock, "aggregations": server.clock - before,
            "round_aggregations": stats["aggregations"], "gradients_aggregated": len(staleness),
            "gradients_dropped": stats["dropped"], "reasons": stats["reasons"],
            "staleness_mean": statistics.fmean(staleness) if staleness else None,
            "staleness_max": max(staleness) if staleness else None,
            "threshold": server.rule.threshold()})
        server.rule.end_round()
        server.round_stats = _fresh_round()
        out["next_threshold"] = server.rule.threshold()
        out["state"] = {"rule": server.rule.state_dict()}
        r.set(parameter_state_key(server.job), server.state_json())
    out["run_s"] = time.monotonic() - t0
    return out
