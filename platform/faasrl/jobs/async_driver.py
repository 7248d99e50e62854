"""The asynchronous job driver (``execution: async``): Stellaris's loop as an asyncio task.

Three kinds of function run side by side, connected through the job's keys in Redis:

- actors sample continuously: a slot is re-invoked as soon as its last rollout returns, with the
  newest policy version it finds (``version: null``), unless ``backlog`` batches already wait;
- whenever a batch waits and fewer than ``max_learners`` learners run, a learner is invoked with
  that batch's stream entry (a key, not data); it computes one gradient on the newest policy and
  pushes it to the job's gradient stream with the clock it used;
- after every learner that pushed a gradient, the parameter function (one at a time, kept warm)
  takes the new gradients into its queue and aggregates as its rule says, publishing versions.

A round is the training on ``actors`` batches (the same env steps per round as the synchronous
driver): it ends once that many batches went to learners and those learners finished; the
parameter function then flushes its queue and advances its rule (``flush``), and the round's row
is written. Actors keep sampling across the boundary, so the next round's first batches are
usually already waiting. Rounds, not seconds, bound everything; which gradient arrives first is
up to the machine, as in any asynchronous system.

The driver does no tensor work (the gateway has no torch): it passes keys and small JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import time
import uuid
from collections import deque
from typing import Any, Literal

from faasrl.contracts import PARAMETER_RESULT, FlushResult, GradientResult, RolloutResult
from faasrl.controllers import Controller
from faasrl.data.keys import (
    gradients_key,
    job_key,
    latest_key,
    learner_weights_key,
    learners_key,
    parameter_state_key,
)
from faasrl.invoker import InvocationRecord
from faasrl.jobs.cost import actor_cost, learner_cost, parameter_cost, serverful_cost
from faasrl.jobs.driver import JobDriver, JobError, RedisDown, _describe, _unreachable
from faasrl.jobs.function_calls import gradient_args, parameter_args, result, rollout_args
from faasrl.jobs.store import JobRecord

log = logging.getLogger(__name__)
STAT_KEYS = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "kl", "clipfrac",
             "truncated", "rho_mean", "grad_norm", "policy_lag", "peers")


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


class AsyncJobDriver(JobDriver):
    restored_fields = (*JobDriver.restored_fields, "parameter_state")

    def __init__(self, record: JobRecord, **kwargs: Any):
        super().__init__(record, **kwargs)
        self._actors: dict[int, asyncio.Task[InvocationRecord]] = {}
        self._waiting: deque[str] = deque()  # trajectory entries no learner has taken yet
        self._session = uuid.uuid4().hex[:12]  # a parameter function from another run reloads

    # ------------------------------------------------------------------- the job
    async def run(self) -> None:
        try:
            await super().run()
        finally:  # cancelled or failed mid-round: rollouts in flight are abandoned
            for task in self._actors.values():
                task.cancel()
            await asyncio.gather(*self._actors.values(), return_exceptions=True)
            self._actors.clear()

    async def _stop_reason(self, controller: Controller) -> str | None:
        reason = await super()._stop_reason(controller)
        if reason is not None:
            await self._drain_actors()
        return reason

    async def _drain_actors(self) -> None:
        """Let the rollouts in flight finish (their containers stay warm); bill them, and drop
        the batches no round will train on."""
        rec = self.record
        done = await asyncio.gather(*self._actors.values())
        self._actors.clear()
        entries = [*self._waiting, *(result(RolloutResult, r).entry for r in done
                                     if r.status == "success")]
        self._waiting.clear()
        rec.cost_usd += actor_cost(done, rec.spec.pricing)
        if entries:
            await self._with_redis(lambda: self.redis.xdel(job_key(rec.id, "trajectories"),
                                                           *entries))

    async def _round_interrupted(self, exc: Exception) -> None:
        """Redis went away mid-round: let the rollouts in flight end (they ride out the outage
        or fail), wait for Redis, and start the round afresh as a resume does (its batches,
        gradients and registrations dropped; the newest published policy kept). Nothing of
        the cut-off round was recorded, so it is neither lost nor counted twice."""
        await asyncio.gather(*self._actors.values(), return_exceptions=True)
        self._actors.clear()
        self._waiting.clear()
        await self._pause(str(exc))
        await self._with_redis(self._restore)

    # ------------------------------------------------------------------ a round
    async def _round(self, controller: Controller) -> None:
        rec, spec = self.record, self.record.spec
        cfg = spec.asynchronous
        k, n = rec.round, self._actors_for_round(controller)
        backlog = cfg.backlog or cfg.max_learners
        self.invoker.prewarm(spec.actor_function, n, placement=spec.placement.actors)
        t0 = time.monotonic()
        actors: list[InvocationRecord] = []
        learner_records: list[InvocationRecord] = []
        parameter_records: list[InvocationRecord] = []
        outputs: list[GradientResult] = []  # what successful learners returned
        learners: dict[asyncio.Task[InvocationRecord], tuple[int, str]] = {}
        parameter: asyncio.Task[InvocationRecord] | None = None
        parameter_again = False
        assigned = peak = 0
        actor_failures = learner_failures = failing_actors = failing_learners = 0
        errors: list[str] = []
        try:
            while assigned < n or learners:
                self._top_up_actors(n, backlog, k)
                free = sorted(set(range(cfg.max_learners)) - {s for s, _ in learners.values()})
                while self._waiting and free and assigned < n:
                    slot, entry = free.pop(0), self._waiting.popleft()
                    learners[asyncio.create_task(self._learner(slot, entry))] = (slot, entry)
                    assigned += 1
                peak = max(peak, len(learners))
                pending = {*self._actors.values(), *learners}
                if parameter is not None:
                    pending.add(parameter)
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is parameter:
                        parameter_records.append(self._parameter_done(task.result()))
                        parameter = None
                        if parameter_again:
                            parameter, parameter_again = self._parameter_step(k), False
                    elif task in learners:
                        slot, entry = learners.pop(task)
                        r = task.result()
                        learner_records.append(r)
                        if _unreachable(r):
                            raise RedisDown(f"round {k}: {_describe(r)}")
                        if r.status != "success":
                            learner_failures += 1
                            failing_learners += 1
                            errors.append(_describe(r))
                            await self._forget_learner(slot, entry)
                            if failing_learners >= cfg.max_learners:
                                raise JobError(f"round {k}: {failing_learners} learners failed "
                                               f"in a row; {errors[-1]}")
                            continue
                        failing_learners = 0
                        outputs.append(result(GradientResult, r))
                        if outputs[-1].pushed:
                            if parameter is None:
                                parameter = self._parameter_step(k)
                            else:
                                parameter_again = True
                    else:
                        slot = next(s for s, t in self._actors.items() if t is task)
                        del self._actors[slot]
                        r = task.result()
                        actors.append(r)
                        if r.status == "success":
                            failing_actors = 0
                            self._waiting.append(result(RolloutResult, r).entry)
                        elif _unreachable(r):
                            raise RedisDown(f"round {k}: {_describe(r)}")
                        else:
                            actor_failures += 1
                            failing_actors += 1
                            errors.append(_describe(r))
                            if failing_actors >= n:
                                raise JobError(f"round {k}: every actor failed; {errors[-1]}")
            if parameter is not None:
                parameter_records.append(self._parameter_done(await parameter))
                parameter = None
        finally:
            for task in [*learners, *([parameter] if parameter else [])]:
                task.cancel()
        if not any(o.pushed for o in outputs):
            reasons = "; ".join(x.reason for o in outputs for x in o.rejected)
            raise JobError(f"round {k}: no valid trajectories ({reasons or errors or 'none'})")
        flush_record = self._parameter_done(await self._invoke_parameter("flush", k))
        parameter_records.append(flush_record)
        flush = result(FlushResult, flush_record)
        await self._append_row(self._record_round(
            k, n, t0, actors, learner_records, parameter_records, outputs, flush,
            actor_failures, learner_failures, peak, errors))

    def _record_round(self, k: int, n: int, t0: float, actors: list[InvocationRecord],
                      learner_records: list[InvocationRecord],
                      parameter_records: list[InvocationRecord], outputs: list[GradientResult],
                      flush: FlushResult, actor_failures: int, learner_failures: int,
                      peak: int, errors: list[str]) -> dict[str, Any]:
        """Account the round on the record; returns its metrics row."""
        rec, spec = self.record, self.record.spec
        ok = [result(RolloutResult, r) for r in actors if r.status == "success"]
        returns = [float(ret) for s in ok for ret, _ in s.episodes]
        steps = sum(s.steps for s in ok)
        cost_actors = actor_cost(actors, spec.pricing)
        cost_learners = learner_cost(learner_records, spec.pricing)
        cost_parameter = parameter_cost(parameter_records, spec.pricing)
        rec.round, rec.version = k + 1, flush.clock
        rec.parameter_state = flush.state
        rec.env_steps += steps
        rec.recent_returns = (rec.recent_returns + returns)[-spec.stop.target_window:]
        rec.cost_usd += cost_actors + cost_learners + cost_parameter
        rec.wall_s = self._wall()
        rec.serverful_cost_usd = serverful_cost(rec.wall_s, spec.pricing)
        pushed = [{**o.stats, "policy_lag": o.policy_lag} for o in outputs if o.pushed]
        every = [*actors, *learner_records, *parameter_records]
        row: dict[str, Any] = {
            "round": k, "actors": n, "actor_failures": actor_failures,
            "version": rec.version, "clock": rec.version, "env_steps": steps,
            "total_env_steps": rec.env_steps, "episodes": len(returns),
            "mean_return": _mean(returns), "max_return": max(returns) if returns else None,
            "recent_mean_return": rec.recent_mean_return, "round_s": time.monotonic() - t0,
            "actor_rollouts": len(actors),
            "actor_s_max": max((r.run_s for r in actors), default=0.0),
            "actor_s_mean": _mean([r.run_s for r in actors]),
            "learners_invoked": len(learner_records), "learners_peak": peak,
            "learner_failures": learner_failures,
            "learner_s": sum(r.run_s for r in learner_records),
            "parameter_invocations": len(parameter_records),
            "parameter_s": sum(r.run_s for r in parameter_records),
            "gradients_aggregated": flush.gradients_aggregated,
            "gradients_dropped": flush.gradients_dropped,
            "aggregations": flush.round_aggregations, "aggregation_reasons": flush.reasons,
            "staleness_mean": flush.staleness_mean, "staleness_max": flush.staleness_max,
            "threshold": flush.threshold, "next_threshold": flush.next_threshold,
            "samples": sum(o.samples for o in outputs),
            "rejected": sum(len(o.rejected) for o in outputs),
            "cold_starts": sum(r.cold for r in every),
            "queue_s_max": max(r.queue_s for r in every),
            "cost_actors": cost_actors, "cost_learner": cost_learners,
            "cost_parameter": cost_parameter,
            "cost_round": cost_actors + cost_learners + cost_parameter,
            "cost_total": rec.cost_usd, "serverful_cost_total": rec.serverful_cost_usd,
            "wall_s": rec.wall_s, "paused_s": self.paused_s,
        }
        row.update({key: _mean([float(o[key]) for o in pushed if o.get(key) is not None])
                    for key in STAT_KEYS})
        if errors:
            row["error"] = errors[0]
        return row

    # ---------------------------------------------------------------- functions
    def _top_up_actors(self, n: int, backlog: int, k: int) -> None:
        """Re-invoke every idle actor slot (below ``n``) while fewer than ``backlog`` wait."""
        rec, spec = self.record, self.record.spec
        for slot in range(n):
            if slot in self._actors or len(self._waiting) >= backlog:
                continue
            args = rollout_args(rec, self.credentials.to_args(), k, slot, None)
            self._actors[slot] = asyncio.create_task(self._invoke(
                spec.actor_function, args.model_dump(mode="json"),
                affinity=f"{rec.id}:actor:{slot}"))

    async def _learner(self, slot: int, entry: str) -> InvocationRecord:
        rec, spec = self.record, self.record.spec
        args = gradient_args(rec, self.credentials.to_args(), slot, entry)
        return await self._invoke(spec.learner_function, args.model_dump(mode="json"),
                                  affinity=f"{rec.id}:learner:{slot}")

    async def _forget_learner(self, slot: int, entry: str) -> None:
        """A learner that failed: unregister it and drop its batch."""
        rec = self.record
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(learners_key(rec.id), str(slot))
            pipe.delete(learner_weights_key(rec.id, slot))
            pipe.xdel(job_key(rec.id, "trajectories"), entry)
            await pipe.execute()

    def _parameter_step(self, k: int) -> asyncio.Task[InvocationRecord]:
        return asyncio.create_task(self._invoke_parameter("step", k))

    async def _invoke_parameter(self, mode: Literal["step", "flush"], k: int
                                ) -> InvocationRecord:
        rec, spec = self.record, self.record.spec
        args = parameter_args(rec, self.credentials.to_args(), mode, k, self._session)
        return await self._invoke(spec.parameter_function, args.model_dump(mode="json"),
                                  affinity=f"{rec.id}:parameter")

    def _parameter_done(self, r: InvocationRecord) -> InvocationRecord:
        if _unreachable(r):
            raise RedisDown(f"round {self.record.round}: {_describe(r)}")
        if r.status != "success":
            raise JobError(f"round {self.record.round}: {_describe(r)}")
        self.record.version = result(PARAMETER_RESULT, r).clock  # what a checkpoint saves
        return r

    # -------------------------------------------------------------------- steps
    def _prewarm(self) -> None:
        spec = self.record.spec
        self.invoker.prewarm(spec.learner_function, spec.asynchronous.max_learners)
        self.invoker.prewarm(spec.parameter_function, 1)

    async def _initialize(self) -> None:
        self._prewarm()
        await super()._initialize()

    async def _restore(self) -> None:
        """Continue from the last round end: Redis first, the disk checkpoint when Redis lost
        it. A round cut off mid-way starts afresh (its batches, gradients and learner
        registrations are dropped), from the newest policy the parameter function published
        and the rule state of the last round end."""
        self._prewarm()
        rec = self.record
        latest = await self.redis.get(latest_key(rec.id))
        if latest is None:
            await self._restore_from_disk()
        elif int(latest) != rec.version:
            log.info("job %s: continuing from version %s, published mid-round", rec.id,
                     int(latest))
            rec.version = int(latest)
        slots = await self.redis.hkeys(learners_key(rec.id))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(job_key(rec.id, "trajectories"), gradients_key(rec.id),
                        learners_key(rec.id),
                        *(learner_weights_key(rec.id, int(s)) for s in slots))
            pipe.set(parameter_state_key(rec.id),
                     json.dumps({"rule": rec.parameter_state.get("rule", {})}))
            await pipe.execute()
