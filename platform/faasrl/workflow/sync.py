"""Synchronous rounds (MinionsRL / Nitro; PPO's full-batch update) as two rules:

- ObjectKeyTrigger(policy) -> the round's actors: a new policy version starts round k; the
  controller's I_k actor slots roll it out in their warm envs, each writing one batch to the
  job's trajectory stream. A slot that fails is invoked again (``ACTOR_ATTEMPTS`` in all), so a
  round never trains on part of its batch;
- DataKeyTrigger(n = I_k) -> the learner: once every slot's batch is in, the learner reads them,
  runs the update, publishes version k+1 and measures what the controller asked for. While it
  runs, the actors the controller forecasts for round k+1 are pre-warmed (predictive pre-warm:
  a boosted round pays no cold starts).

The learner's new version ends the round: the run appends its row and asks the controller for
I_{k+1}. A round cut off by an unreachable Redis runs again from the same version; each step is
idempotent (a retried actor's second batch replaces its first, a retried learner answers with
the update it already published).

On a virtual clock (``clock: virtual``, docs/virtual-clock.md) what a round learns does not
change (its actors all roll out the round's version, its learner waits for all of them), but
the engine starts the round's actors on the modeled cluster's cores as they free up (list
scheduling, each lasting its calibrated duration; a slot's retries one after another) and the
learner after the last of them: rows then carry ``virtual_s``, the round's length there, and
``virtual_cost_round``, its invocations billed at their virtual durations.
"""

from __future__ import annotations

import logging
import statistics
import time
from functools import partial
from typing import Any

from faasrl import round_row as rr
from faasrl.algorithms.surface import SyncAlgorithm
from faasrl.contracts import RolloutResult, UpdateResult
from faasrl.controllers.nitro import convexity_ratio
from faasrl.data.keys import optimizer_keys
from faasrl.data.ops import roll_back
from faasrl.invoker import InvocationRecord
from faasrl.jobs.contract_args import result, rollout_args, update_args
from faasrl.jobs.cost import actor_cost, learner_cost
from faasrl.workflow.engine import Engine
from faasrl.workflow.job import (
    JobError,
    JobRun,
    RoundOutcome,
    actor_affinity,
    describe,
)
from faasrl.workflow.trigger_buffer import POLICY, TRAJECTORIES, Item, TriggerBuffer
from faasrl.workflow.triggers import DataKeyTrigger, Message, ObjectKeyTrigger, Rule
from faasrl.workflow.virtual_job import actor_columns, job_clock, mark, round_columns

log = logging.getLogger(__name__)
ACTOR_ATTEMPTS = 3  # invocations of one actor slot in a round before the job fails


def measurements(out: UpdateResult) -> dict[str, Any]:
    """The learner's measurements for controllers, flattened into metrics-row columns."""
    row: dict[str, Any] = {}
    if (h := out.hessian) is not None:
        row.update({rr.HESSIAN_LAMBDA_MIN: h.lambda_min, rr.HESSIAN_LAMBDA_MAX: h.lambda_max,
                    rr.HESSIAN_RATIO: convexity_ratio(h.lambda_min, h.lambda_max),
                    rr.HESSIAN_S: h.seconds, rr.HESSIAN_SAMPLES: h.samples,
                    rr.HESSIAN_ITERATIONS: h.iterations})
    if (g := out.gns) is not None:
        row.update({rr.GNS: g.gns, rr.GNS_GRAD_SQ: g.grad_sq, rr.GNS_TRACE: g.trace})
    return row


class SyncWorkflow:
    """Rounds of I_k actors, then one learner update (PPO)."""

    ALGORITHM_SURFACE = SyncAlgorithm  # what it calls on the job's algorithm module

    def __init__(self, run: JobRun):
        self.run = run
        self.buffer = TriggerBuffer()
        self.new_policy = ObjectKeyTrigger(POLICY)
        self.virtual = run.record.spec.virtual  # None: real time
        self.engine = Engine(self.buffer, [
            Rule("rollout", self.new_policy, self._rollout),
            Rule("update", DataKeyTrigger(n=lambda: self._n), self._update),
        ], *job_clock(self.virtual, run.record.spec.seed))
        self._n = 0
        self._attempts: dict[int, list[InvocationRecord]] = {}  # per slot, the last succeeded
        self._rollouts: dict[int, RolloutResult] = {}
        self._learners: list[InvocationRecord] = []
        self._update_out: UpdateResult | None = None
        self._t0 = self._t1 = 0.0
        self._mark = mark(self.engine)
        self._forecast = 0

    async def start(self) -> None:
        """Nothing beyond the run's actors: the learner is pre-warmed each round."""

    async def reconcile(self, latest: int) -> None:
        """The learner published a version whose round the run never recorded (the gateway
        stopped in between): go back to the recorded version, so that the round runs again
        and gets its row (its batches were consumed; new rollouts replace them)."""
        rec = self.run.record
        version = rec.version or 0
        if latest < version:
            return
        log.warning("job %s: rolling back from version %d, published after the last recorded "
                    "round, to %d", rec.id, latest, version)
        kept = await self.run.redis.get(optimizer_keys(rec.id, previous=True)[1])
        async with self.run.redis.pipeline(transaction=True) as pipe:
            roll_back(pipe, rec.id, to=version, latest=latest,
                      optimizer_kept=kept is not None and int(kept) == version)
            await pipe.execute()

    async def reset(self) -> None:
        """A synchronous round leaves nothing behind: its batches are replaced on rerun."""

    async def interrupted(self, exc: Exception) -> None:
        await self.run.pause(str(exc))

    async def finish(self) -> None:
        """Every invocation of a finished round has ended."""

    async def abandon(self) -> None:
        await self.engine.cancel(("actor", "learner"))

    # ------------------------------------------------------------------ a round
    async def round(self) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        self._n = run.actors_for_round()
        self._attempts, self._rollouts, self._learners = {}, {}, []
        self._update_out = None
        run.prewarm(spec.actor_function, self._n, placement=spec.placement.actors)
        run.prewarm(spec.learner_function, 1)
        self.buffer.clear()
        self.new_policy.reset()
        self.buffer.publish(POLICY, rec.version or 0)
        self._t0, self._mark = time.monotonic(), mark(self.engine)
        try:
            await self.engine.run(finished=lambda: self._update_out is not None)
        finally:
            await self.engine.cancel(("actor", "learner"))
        await self._close(self._update_out)

    def _rollout(self, message: Message) -> None:
        """A new policy: the round's I_k actor slots roll it out."""
        for slot in range(self._n):
            self.engine.start("actor", partial(self._actor_slot, slot, message["version"]),
                              lambda attempts, slot=slot: self._rolled_out(slot, attempts))

    async def _actor_slot(self, slot: int, version: int) -> list[InvocationRecord]:
        """One slot's rollout: every attempt, the last one successful. A slot that fails is
        invoked again; one that fails ``ACTOR_ATTEMPTS`` times ends the job, since training
        on a partial batch would change what a round means."""
        run, rec = self.run, self.run.record
        args = rollout_args(rec, run.credentials.to_args(), rec.round, slot, version)
        attempts = await run.invoke_until_done(rec.spec.actor_function,
                                               args.model_dump(mode="json"),
                                               affinity=actor_affinity(rec.id, slot),
                                               retries=ACTOR_ATTEMPTS - 1)
        if attempts[-1].status != "success":
            raise JobError(f"round {rec.round}: actor slot {slot} failed {len(attempts)} "
                           f"times; {describe(attempts[-1])}")
        return attempts

    def _rolled_out(self, slot: int, attempts: list[InvocationRecord]) -> None:
        self._attempts[slot] = attempts
        out = self._rollouts[slot] = result(RolloutResult, attempts[-1])
        self.buffer.put(TRAJECTORIES, Item(entry=out.entry, slot=slot, version=out.version,
                                           size=out.steps))

    def _update(self, message: Message) -> None:
        """Every slot's batch is in: pre-warm the next round's forecast, run the learner."""
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        items: list[Item] = message["items"]
        self.buffer.take(TRAJECTORIES, items)
        self._t1 = time.monotonic()
        # Predictive pre-warm: containers for the next round start while the learner runs.
        # The forecast sees what the actors already told (a row without the learner's columns).
        ok = [self._attempts[s][-1] for s in sorted(self._attempts)]
        returns = [ret for out in self._rollouts.values() for ret, _ in out.episodes]
        run_times = [r.run_s for r in ok]
        partial = {rr.ROUND: rec.round, rr.ACTORS: self._n,
                   rr.MEAN_RETURN: statistics.fmean(returns) if returns else None,
                   rr.ACTOR_S_MEAN: statistics.fmean(run_times), rr.ACTOR_S_MAX: max(run_times),
                   rr.COST_ACTORS: actor_cost(self._every_actor(), spec.pricing)}
        if self.virtual:  # and the actors on the virtual clock, which a controller reads there
            partial.update(actor_columns(self.engine, self._mark, self._every_actor(),
                                         spec.pricing))
        self._forecast = max(0, run.controller.forecast(run.context(rec.round + 1, partial)))
        run.prewarm(spec.actor_function, self._forecast,
                    placement=spec.placement.actors)
        args = update_args(rec, run.credentials.to_args(), rec.round,
                           sorted(i.slot for i in items), run.controller.learner_requests())
        cores = run.learner_cores(self._n)
        self.engine.start("learner", lambda: run.invoke_until_done(
            spec.learner_function, args.model_dump(mode="json"), affinity=f"{rec.id}:learner",
            cores=cores), self._learned)

    def _learned(self, learners: list[InvocationRecord]) -> None:
        if learners[-1].status != "success":
            raise JobError(f"round {self.run.record.round}: {describe(learners[-1])}")
        self._learners = learners
        self._update_out = result(UpdateResult, learners[-1])
        self.buffer.publish(POLICY, self._update_out.version)

    def _every_actor(self) -> list[InvocationRecord]:
        """Every attempt of every slot: each one is billed."""
        return [r for attempts in self._attempts.values() for r in attempts]

    async def _close(self, out: UpdateResult) -> None:
        rec, spec = self.run.record, self.run.record.spec
        actors, learners = self._every_actor(), self._learners
        failed = [r for r in actors if r.status != "success"]
        learner = learners[-1]
        t2 = time.monotonic()
        columns = {
            rr.ACTOR_FAILURES: len(failed),
            rr.ACTOR_PHASE_S: self._t1 - self._t0, rr.LEARNER_PHASE_S: t2 - self._t1,
            rr.LEARNER_S: learner.run_s, rr.LEARNER_CORES: learner.cores,
            rr.ACTOR_COLD_STARTS: sum(r.cold for r in actors),
            rr.PREWARM_FORECAST: self._forecast,
            **out.stats,  # the algorithm's own figures: its losses, KL, lr, ...
            rr.LEARNER_DEVICE: out.device, rr.SAMPLES: out.samples, rr.POLICY_KL: out.policy_kl,
            **measurements(out), rr.REJECTED: len(out.rejected),
            rr.TRANSFER_S: out.read_s + max(r.write_s for r in self._rollouts.values()),
        }
        if self.virtual:
            columns.update(round_columns(self.engine, self._mark, actors, spec.pricing))
        if failed:
            columns[rr.ACTOR_ERROR] = describe(failed[0])
        if out.rejected:
            columns[rr.REJECTED_REASONS] = [r.reason for r in out.rejected][:5]
        await self.run.close_round(RoundOutcome(
            round=rec.round, actors=self._n, version=out.version,
            algorithm_state=out.algorithm_state, started=self._t0,
            rollouts=[self._attempts[s][-1] for s in sorted(self._attempts)],
            invocations=[*actors, *learners],
            costs={rr.COST_ACTORS: actor_cost(actors, spec.pricing),
                   rr.COST_LEARNER: learner_cost(learners, spec.pricing)},
            columns=columns,
            env_starts=[s for s in sorted(self._rollouts) if self._rollouts[s].envs_started]))
