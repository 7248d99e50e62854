"""Asynchronous training (``execution: async``), Stellaris's loop as the authors run it, as four
rules:

- ObjectKeyTrigger(policy, any version) -> an actor: every idle actor slot (below the round's
  I_k) samples again with the newest policy it finds (``version: null``), unless ``backlog``
  batches already wait;
- DataKeyTrigger(n = 1) -> the cut: a waiting batch enters the round when a learner slot is
  free and no slice waits for its first pass, and every slice of the round's batch it completes
  is queued for its first pass (an entry of the ``slices`` stream);
- DataKeyTrigger(n = 1, slices) -> a learner (FIFO training): whenever a slice waits and one of
  the ``max_learners`` learner slots is free, a learner gets the slice (stream keys and env
  columns, not data), computes one gradient on the newest policy and pushes it, with the clock
  it used, to the job's gradient stream; the slice then queues again for its next pass, until
  it had ``sgd_iters``;
- DataKeyTrigger(n = 1, gradients) -> the parameter function (one at a time, kept warm): it
  takes the new gradients into its queue and aggregates as its rule says, publishing versions.

The passes. The authors' code runs ``num_sgd_iter`` = 10 passes per round, each cutting the
round's batch into one slice per learner (4), every learner computing one gradient on its slice
with the newest weights it can pull, and the aggregator applying each gradient as its own
optimizer step. Here the round's batch (its I_k actor batches) is cut into ``learner_slices``
slices of whole env trajectories (:func:`cut`: contiguous in arrival order, so a slice is ready
as soon as its batches are, and V-trace keeps whole time axes; a round with fewer trajectories
has one slice per trajectory; ``null``: one per actor batch), and a pass is one trip of every
slice through the ``slices`` stream: a slice's next pass queues behind the slices already
waiting, so passes go round the slices as the authors' go round their learners, each
gradient on the newest published policy. A round yields slices x ``sgd_iters`` gradients.
Batches that wait for the cut stay in the trajectory stream, where the actors' backlog counts
them, so ``sgd_iters: 1, learner_slices: null`` schedules exactly as one gradient per batch
did.

A round is the training on I_k batches (the same env steps per round as the synchronous
workflow): it ends once all of them were cut and every slice had its passes (a slice whose
learner failed, or whose batches were all rejected, has no more); the parameter function then
flushes its queue and advances its rule (``flush``), the round's batches are dropped, and its
row is written. Actors keep sampling across the boundary, so the next round's first batches
are usually already waiting. Rounds, not seconds, bound everything.

A round cut off by an unreachable Redis is dropped and run again from the newest published
policy and the rule state of the last round end: nothing of it was recorded, so it is neither
lost nor counted twice.

On a virtual clock (``clock: virtual``, docs/virtual-clock.md) the engine starts invocations
when the modeled cluster has a core for them and hands results over in virtual order, and what
each function reads is pinned to what the workflow saw at its virtual start, not taken from
Redis when it really runs: an actor's policy version; a learner's version and its peers'
(slot -> version, for the cross-learner ratios); the parameter function's gradients (the stream
entries released so far, in that order) and the clocks of the learners still computing. Rows
then carry ``virtual_s``, the round's length on the virtual clock, and ``virtual_cost_round``,
the invocations that ended in it billed at their virtual durations.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, TypeVar

from faasrl import round_row as rr
from faasrl.algorithms.surface import AsyncAlgorithm
from faasrl.contracts import FlushResult, GradientResult, RolloutResult, StepResult
from faasrl.data.keys import learners_key
from faasrl.data.ops import drop_batches, reset_round, unregister_learner
from faasrl.invoker import InvocationRecord
from faasrl.jobs.contract_args import gradient_args, parameter_args, result, rollout_args
from faasrl.jobs.cost import actor_cost, learner_cost, parameter_cost
from faasrl.workflow.engine import Engine
from faasrl.workflow.job import (
    JobError,
    JobRun,
    RedisDown,
    RoundOutcome,
    actor_affinity,
    describe,
    mean,
    unreachable,
)
from faasrl.workflow.trigger_buffer import GRADIENTS, POLICY, TRAJECTORIES, Item, TriggerBuffer
from faasrl.workflow.triggers import DataKeyTrigger, Message, ObjectKeyTrigger, Rule
from faasrl.workflow.virtual_job import Mark, job_clock, mark, round_columns

log = logging.getLogger(__name__)
S = TypeVar("S", bound=StepResult)
SLICES = "slices"  # slices of the round's batch waiting for their next pass (Item.version)


@dataclass(frozen=True)
class Part:
    """A slice's share of one actor batch: the round's ``batch``-th, env columns [start, stop)."""

    batch: int
    start: int
    stop: int


def cut(batches: int, envs: int, slices: int | None) -> list[list[Part]]:
    """The round's batch (``batches`` actor batches of ``envs`` env trajectories each) cut into
    ``slices`` contiguous slices of whole trajectories, as even as can be; fewer when it has
    fewer trajectories; None: one per actor batch."""
    units = batches * envs
    n = batches if slices is None else min(slices, units)
    bounds = [i * units // n for i in range(n + 1)]
    return [[Part(b, max(lo, b * envs) - b * envs, min(hi, (b + 1) * envs) - b * envs)
             for b in range(lo // envs, (hi - 1) // envs + 1)]
            for lo, hi in pairwise(bounds)]


@dataclass
class _Round:
    """A round's batches, slices, invocations and counts, for its row."""

    plan: list[list[Part]]  # the slices of the round's batch
    actors: list[InvocationRecord] = field(default_factory=list)
    learners: list[InvocationRecord] = field(default_factory=list)
    parameter: list[InvocationRecord] = field(default_factory=list)
    outputs: list[GradientResult] = field(default_factory=list)  # successful learners' results
    errors: list[str] = field(default_factory=list)
    batches: list[Item] = field(default_factory=list)  # cut into the round, in arrival order
    released: int = 0  # slices queued for their first pass
    rejected: set[str] = field(default_factory=set)  # entries no later pass reads
    learner_slots: dict[int, int] = field(default_factory=dict)  # running: slot -> slice
    samples: int = 0  # rows trained on by first passes
    peak: int = 0
    actor_failures: int = 0
    learner_failures: int = 0
    env_starts: list[int] = field(default_factory=list)  # slots whose envs started afresh
    failing_actors: int = 0  # in a row
    failing_learners: int = 0


class StellarisWorkflow:
    """Continuous actors, FIFO learners, staleness-aware aggregation (Stellaris)."""

    ALGORITHM_SURFACE = AsyncAlgorithm  # what it calls on the job's algorithm module

    def __init__(self, run: JobRun):
        self.run = run
        self.settings = run.record.spec.asynchronous
        self.buffer = TriggerBuffer()
        self.virtual = run.record.spec.virtual  # None: real time
        self.engine = Engine(self.buffer, [
            Rule("rollout", ObjectKeyTrigger(POLICY, new_only=False), self._rollout,
                 ready=self._actor_idle),
            Rule("cut", DataKeyTrigger(n=1), self._cut, ready=self._room),
            Rule("gradient", DataKeyTrigger(n=1, stream=SLICES), self._learn,
                 ready=self._learner_free),
            Rule("aggregate", DataKeyTrigger(n=1, stream=GRADIENTS), self._aggregate,
                 ready=lambda: not self.engine.running("parameter")),
        ], *job_clock(self.virtual, run.record.spec.seed))
        self._actors: set[int] = set()  # slots with a rollout in flight (across rounds)
        self._clocks: dict[int, int] = {}  # learner slot -> the version it computes on
        self._sampling: dict[int, int] = {}  # actor slot -> the version it samples with
        self._n = 0
        self._round = _Round(plan=[])
        self._session = uuid.uuid4().hex[:12]  # a parameter function from another run reloads
        self._parameter_ran = False  # in this run

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        spec = self.run.record.spec
        self.run.prewarm(spec.learner_function, self.settings.max_learners)
        self.run.prewarm(spec.parameter_function, 1)

    async def reconcile(self, latest: int) -> None:
        """The parameter function published mid-round: continue from its newest version."""
        log.info("job %s: continuing from version %s, published mid-round", self.run.record.id,
                 latest)
        self.run.adopt(latest)

    async def reset(self) -> None:
        """A round cut off mid-way starts afresh: its batches, gradients and learner
        registrations dropped, the rule state of the last round end put back."""
        rec, redis = self.run.record, self.run.redis
        slots = await redis.hkeys(learners_key(rec.id))
        async with redis.pipeline(transaction=True) as pipe:
            reset_round(pipe, rec.id, (int(s) for s in slots),
                        json.dumps({"rule": rec.parameter_state.get("rule", {})}))
            await pipe.execute()
        self.buffer.clear()

    async def interrupted(self, exc: Exception) -> None:
        """Redis went away mid-round: let the rollouts in flight end (they ride out the outage
        or fail), wait for Redis, and start the round afresh as a resume does."""
        await self.engine.settle(("actor",))
        self._actors.clear()
        self._sampling.clear()
        self.buffer.clear()
        await self.run.pause(str(exc))
        await self.run.with_redis(self.run.restore)

    async def finish(self) -> None:
        """Let the rollouts in flight finish (their containers stay warm); bill them, and drop
        the batches no round will train on."""
        rec = self.run.record
        done = [r for r in await self.engine.settle(("actor",))
                if isinstance(r, InvocationRecord)]
        self._actors.clear()
        self._sampling.clear()
        entries = [i.entry for i in self.buffer.drain(TRAJECTORIES)]
        entries += [result(RolloutResult, r).entry for r in done if r.status == "success"]
        self.run.bill(actor_cost(done, rec.spec.pricing))

        async def drop() -> None:
            async with self.run.redis.pipeline(transaction=True) as pipe:
                drop_batches(pipe, rec.id, entries)
                await pipe.execute()

        await self.run.with_redis(drop)

    async def abandon(self) -> None:
        await self.engine.cancel(("actor", "learner", "parameter"))
        self._actors.clear()
        self._sampling.clear()

    # ------------------------------------------------------------------ a round
    async def round(self) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        k = rec.round
        self._n = run.actors_for_round()
        self._round = st = _Round(plan=cut(self._n, spec.envs_per_actor,
                                           self.settings.learner_slices))
        self._clocks.clear()  # a round cut off may have left learners' behind
        run.prewarm(spec.actor_function, self._n, placement=spec.placement.actors)
        self.buffer.publish(POLICY, rec.version or 0)
        t0, start = time.monotonic(), mark(self.engine)
        if not self._parameter_ran:  # loaded while the first batches are sampled
            self._step()
        try:
            await self.engine.run(finished=lambda: len(st.batches) >= self._n
                                  and not self.buffer.pending(SLICES)
                                  and not self.engine.running("learner"))
            await self.engine.wait_for("parameter")
        finally:
            await self.engine.cancel(("learner", "parameter"))
        if not any(o.pushed for o in st.outputs):
            reasons = "; ".join(x.reason for o in st.outputs for x in o.rejected)
            raise JobError(f"round {k}: no valid trajectories "
                           f"({reasons or st.errors or 'none'})")
        flush = self._parameter_done(
            await self.engine.call("parameter", lambda: self._invoke_parameter("flush")),
            FlushResult)
        await self._drop([b.entry for b in st.batches])
        await self._close(t0, start, flush)

    def _actor_idle(self) -> bool:
        backlog = self.settings.backlog or self.settings.max_learners
        return (len(self.buffer.pending(TRAJECTORIES)) < backlog
                and any(s not in self._actors for s in range(self._n)))

    def _rollout(self, message: Message) -> None:
        """An idle actor slot samples with the newest policy."""
        run, rec = self.run, self.run.record
        slot = next(s for s in range(self._n) if s not in self._actors)
        self._actors.add(slot)

        def work() -> Awaitable[InvocationRecord]:
            """The newest version (on a virtual clock: the newest it saw, pinned)."""
            version = (rec.version or 0) if self.virtual else None
            if version is not None:
                self._sampling[slot] = version
            args = rollout_args(rec, run.credentials.to_args(), rec.round, slot, version)
            return run.invoke(rec.spec.actor_function, args.model_dump(mode="json"),
                              affinity=actor_affinity(rec.id, slot))

        self.engine.start("actor", work, lambda r: self._rolled_out(slot, r))

    def _rolled_out(self, slot: int, r: InvocationRecord) -> None:
        st = self._round
        self._actors.discard(slot)
        self._sampling.pop(slot, None)
        st.actors.append(r)
        if r.status == "success":
            st.failing_actors = 0
            out = result(RolloutResult, r)
            if out.envs_started:
                st.env_starts.append(slot)
            self.buffer.put(TRAJECTORIES, Item(entry=out.entry, slot=slot, version=out.version,
                                               size=out.steps))
        elif unreachable(r):
            raise RedisDown(f"round {self.run.record.round}: {describe(r)}")
        else:
            st.actor_failures += 1
            st.failing_actors += 1
            st.errors.append(describe(r))
            if st.failing_actors >= self._n:
                raise JobError(f"round {self.run.record.round}: every actor failed; "
                               f"{st.errors[-1]}")

    def _room(self) -> bool:
        """The round takes a batch in when a learner could start on it: batches that wait are
        the actors' backlog."""
        st = self._round
        return (len(st.batches) < self._n and self._learner_free()
                and not any(i.version == 0 for i in self.buffer.pending(SLICES)))

    def _cut(self, message: Message) -> None:
        """A batch enters the round: the slices it completes queue for their first pass."""
        st, item = self._round, message["items"][0]
        self.buffer.take(TRAJECTORIES, [item])
        st.batches.append(item)
        while st.released < len(st.plan) and \
                max(p.batch for p in st.plan[st.released]) < len(st.batches):
            self.buffer.put(SLICES, Item(entry=str(st.released), slot=st.released, version=0))
            st.released += 1

    def _learner_free(self) -> bool:
        """A learner slot is free, and the parameter function is loaded: until its first
        answer of the run no version could follow the gradients, and round 0's δ_max would
        measure its cold start instead of the asynchrony."""
        return self._parameter_ran and \
            len(self._round.learner_slots) < self.settings.max_learners

    def _learn(self, message: Message) -> None:
        """A slice waits and a learner slot is free: a learner computes its gradient."""
        run, rec, spec, st = self.run, self.run.record, self.run.record.spec, self._round
        item: Item = message["items"][0]
        self.buffer.take(SLICES, [item])
        parts = [(st.batches[p.batch].entry, (p.start, p.stop)) for p in st.plan[item.slot]
                 if st.batches[p.batch].entry not in st.rejected]
        if not parts:  # a peer's learner rejected all of it
            return
        slot = min(set(range(self.settings.max_learners)) - set(st.learner_slots))
        st.learner_slots[slot] = item.slot
        st.peak = max(st.peak, len(st.learner_slots))
        args = gradient_args(rec, run.credentials.to_args(), slot, [e for e, _ in parts],
                             [envs for _, envs in parts])

        def work() -> Awaitable[InvocationRecord]:
            """On a virtual clock: the version it saw and its peers' then, pinned."""
            pinned = args
            if self.virtual:
                pinned = args.model_copy(update={"version": rec.version or 0,
                                                 "peers": dict(self._clocks)})
                self._clocks[slot] = rec.version or 0
            return run.invoke(spec.learner_function, pinned.model_dump(mode="json"),
                              affinity=f"{rec.id}:learner:{slot}")

        self.engine.start("learner", work, lambda r: self._learned(slot, item, r))

    async def _learned(self, slot: int, item: Item, r: InvocationRecord) -> None:
        """A learner's gradient: the parameter function's to take, and the slice's next pass
        queued (a failed learner ends its slice: what failed it would fail it again)."""
        st = self._round
        del st.learner_slots[slot]
        self._clocks.pop(slot, None)
        st.learners.append(r)
        if unreachable(r):
            raise RedisDown(f"round {self.run.record.round}: {describe(r)}")
        if r.status != "success":
            st.learner_failures += 1
            st.failing_learners += 1
            st.errors.append(describe(r))
            await self._unregister(slot)
            if st.failing_learners >= self.settings.max_learners:
                raise JobError(f"round {self.run.record.round}: {st.failing_learners} learners "
                               f"failed in a row; {st.errors[-1]}")
            return
        st.failing_learners = 0
        out = result(GradientResult, r)
        st.outputs.append(out)
        st.rejected.update(x.entry for x in out.rejected)
        if not out.pushed:
            return
        self.buffer.put(GRADIENTS, Item(entry=out.entry or r.id, slot=slot, version=out.clock))
        if item.version == 0:
            st.samples += out.samples
        if item.version + 1 < self.settings.sgd_iters:
            self.buffer.put(SLICES, Item(entry=item.entry, slot=item.slot,
                                         version=item.version + 1))

    async def _unregister(self, slot: int) -> None:
        """A learner that failed: peers stop computing ratios against it."""
        async with self.run.redis.pipeline(transaction=True) as pipe:
            unregister_learner(pipe, self.run.record.id, slot)
            await pipe.execute()

    async def _drop(self, entries: list[str]) -> None:
        """The round's batches: every pass has been over them."""
        async with self.run.redis.pipeline(transaction=True) as pipe:
            drop_batches(pipe, self.run.record.id, entries)
            await pipe.execute()

    def _aggregate(self, message: Message) -> None:
        """New gradients: the parameter function takes them into its queue."""
        self._step()

    def _step(self) -> None:
        self.engine.start("parameter", lambda: self._invoke_parameter("step"),
                          lambda r: self._parameter_done(r, StepResult))

    def _invoke_parameter(self, mode: Literal["step", "flush"]) -> Awaitable[InvocationRecord]:
        """The parameter function takes the gradients new at its start. On a virtual clock a
        step takes the oldest one released (a flush, all), and the clocks of the learners
        still computing: a real step takes gradients one at a time as they arrive, publishing
        as it aggregates, and a learner starting meanwhile computes on what it published; a
        virtual step's versions are seen at its end, so it is one gradient long."""
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        if self.virtual and mode == "step":
            oldest = self.buffer.pending(GRADIENTS)[:1]
            self.buffer.take(GRADIENTS, oldest)
            taken = [i.entry for i in oldest]
        else:
            taken = [i.entry for i in self.buffer.drain(GRADIENTS)]
        args = parameter_args(rec, run.credentials.to_args(), mode, rec.round, self._session)
        if self.virtual:
            # Keep every version a function pinned at its virtual start: it may still be
            # running for real while this step publishes up to one version per gradient.
            current = rec.version or 0
            oldest = min([current, *self._clocks.values(), *self._sampling.values()])
            args = args.model_copy(update={"gradients": taken,
                                           "in_flight": list(self._clocks.values()),
                                           "keep": args.keep + current - oldest + len(taken)})
        return run.invoke(spec.parameter_function, args.model_dump(mode="json"),
                          affinity=f"{rec.id}:parameter")

    def _parameter_done(self, r: InvocationRecord, contract: type[S]) -> S:
        """A step's or a flush's result: its clock is the newest version."""
        rec = self.run.record
        if unreachable(r):
            raise RedisDown(f"round {rec.round}: {describe(r)}")
        if r.status != "success":
            raise JobError(f"round {rec.round}: {describe(r)}")
        self._round.parameter.append(r)
        self._parameter_ran = True
        out = result(contract, r)
        self.run.adopt(out.clock)  # what a checkpoint now saves
        self.buffer.publish(POLICY, out.clock)
        return out

    async def _close(self, t0: float, start: Mark, flush: FlushResult) -> None:
        rec, spec, st = self.run.record, self.run.record.spec, self._round
        self.run.adopt(parameter_state=flush.state)
        pushed = [{**o.stats, rr.POLICY_LAG: o.policy_lag} for o in st.outputs if o.pushed]
        columns: dict[str, Any] = {
            rr.ACTOR_FAILURES: st.actor_failures, rr.CLOCK: flush.clock,
            rr.ACTOR_ROLLOUTS: len(st.actors),
            rr.LEARNERS_INVOKED: len(st.learners), rr.LEARNERS_PEAK: st.peak,
            rr.LEARNER_FAILURES: st.learner_failures,
            rr.LEARNER_S: sum(r.run_s for r in st.learners),
            rr.LEARNER_DEVICE: next((o.device for o in reversed(st.outputs) if o.device), None),
            rr.PARAMETER_INVOCATIONS: len(st.parameter),
            rr.PARAMETER_S: sum(r.run_s for r in st.parameter),
            rr.GRADIENTS_AGGREGATED: flush.gradients_aggregated,
            rr.GRADIENTS_DROPPED: flush.gradients_dropped,
            rr.AGGREGATIONS: flush.round_aggregations, rr.AGGREGATION_REASONS: flush.reasons,
            rr.STALENESS_MEAN: flush.staleness_mean, rr.STALENESS_MAX: flush.staleness_max,
            rr.THRESHOLD: flush.threshold, rr.NEXT_THRESHOLD: flush.next_threshold,
            rr.SLICES: len(st.plan), rr.SAMPLES: st.samples,
            rr.REJECTED: sum(len(o.rejected) for o in st.outputs),
            # the algorithm's own figures (losses, ratios, ...), averaged over its gradients
            **{key: mean([float(o[key]) for o in pushed if o.get(key) is not None])
               for key in dict.fromkeys(k for o in pushed for k in o)},
        }
        if self.virtual:
            columns.update(round_columns(self.engine, start, st.actors, spec.pricing))
        if st.errors:
            columns[rr.ERROR] = st.errors[0]
        await self.run.close_round(RoundOutcome(
            round=rec.round, actors=self._n, version=flush.clock, started=t0,
            rollouts=[r for r in st.actors if r.status == "success"],
            invocations=[*st.actors, *st.learners, *st.parameter],
            costs={rr.COST_ACTORS: actor_cost(st.actors, spec.pricing),
                   rr.COST_LEARNER: learner_cost(st.learners, spec.pricing),
                   rr.COST_PARAMETER: parameter_cost(st.parameter, spec.pricing)},
            columns=columns, env_starts=st.env_starts))

