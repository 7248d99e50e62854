"""Off-policy training (``execution: offpolicy``: DQN, SAC) as four rules on the buffer:

- ObjectKeyTrigger(policy, any version) -> actors: every idle actor slot (below the round's
  I_k) explores with the newest policy it finds (ARTOS's off-policy sync: an actor pulls new
  weights whenever the learner published), computes its transitions' priorities at the edge and
  pushes them to the job's stream; it is invoked again as soon as it finishes;
- DataKeyTrigger(n = 1) -> the buffer function ingests every entry waiting (one buffer call at
  a time: the memory lives in one warm container);
- DataKeyTrigger(memory size >= learning_starts) -> the buffer samples ``publish_every``
  batches for the learner, handing it the learner's last priorities first; one sample waits
  ahead of the learner, so sampling overlaps training (its priorities are then one learner
  call old, as in Ape-X);
- DataKeyTrigger(n = 1, samples) -> the learner takes a gradient step per batch and publishes.

Actors and learner keep the replay ratio (``updates_per_step`` gradient steps per env step):
whichever runs ahead waits. A round, for metrics and the controller, is ``steps_per_round``
gradient steps (whole learner calls; the warm-up before ``learning_starts`` falls into round
0); actors, buffer and learner calls in flight carry over into the next round. A round also
ends early where the job reaches its ``max_env_steps`` or ``max_wall_s``: no actor starts past
them, and the round closes once the actors running have returned (a job capped below its
``learning_starts`` ends there, rather than after its whole warm-up).

On a virtual clock (``clock: virtual``, docs/virtual-clock.md) the engine starts invocations
when the modeled cluster has a core for them and hands results over in virtual order. Buffer
and learner calls already run one at a time, each reading what the calls before it wrote; what
an actor reads is pinned: the policy version current at its virtual start, not the newest in
Redis when it really runs, and a learner's publish keeps every version an actor still explores
with (``TrainArgs.keep``). Rows then carry ``virtual_s``, the round's length on the virtual
clock, and ``virtual_cost_round``, the calls that ended in it billed at their virtual
durations; ``learner_idle_s`` is virtual too.

Faults: a killed actor is invoked again; a killed buffer container is replaced and restores the
memory's last snapshot, and the transitions it lost are counted in the row (``lost``); a
failed learner call is made again from the version it was given (its publish is one
transaction). A round cut off by an unreachable Redis starts afresh from the newest version.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from faasrl import round_row as rr
from faasrl.algorithms import algorithm
from faasrl.algorithms.offpolicy import annealed_beta
from faasrl.algorithms.surface import OffPolicyAlgorithm
from faasrl.contracts import ExploreResult, IngestResult, SampleResult, TrainResult
from faasrl.data.ops import KEEP_VERSIONS, drop_stream
from faasrl.invoker import InvocationRecord
from faasrl.jobs.contract_args import (
    explore_args,
    ingest_args,
    result,
    sample_args,
    train_args,
)
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
from faasrl.workflow.trigger_buffer import (
    MEMORY,
    POLICY,
    SAMPLES,
    TRAJECTORIES,
    Item,
    TriggerBuffer,
)
from faasrl.workflow.triggers import DataKeyTrigger, Message, ObjectKeyTrigger, Rule
from faasrl.workflow.virtual_job import Mark, job_clock, mark, round_columns

log = logging.getLogger(__name__)
FAILURES_IN_A_ROW = 5  # of one function before the job fails


@dataclass
class _Round:
    """A round's invocations and figures, for its row."""

    actors: list[InvocationRecord] = field(default_factory=list)
    explored: list[tuple[int, ExploreResult]] = field(default_factory=list)  # (slot, result)
    buffer: list[InvocationRecord] = field(default_factory=list)
    learners: list[InvocationRecord] = field(default_factory=list)
    trained: list[TrainResult] = field(default_factory=list)
    sampled: list[SampleResult] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost: int = 0
    restores: int = 0
    snapshot_s: float = 0.0
    learner_idle_s: float = 0.0


class OffPolicyWorkflow:
    """Continuous actors, a replay-buffer function, a learner sampling it (DQN, SAC)."""

    ALGORITHM_SURFACE = OffPolicyAlgorithm  # what it calls on the job's algorithm module

    def __init__(self, run: JobRun):
        self.run = run
        self.cfg = run.record.spec.hyperparameters
        self.buffer = TriggerBuffer()
        self.virtual = run.record.spec.virtual  # None: real time
        self.engine = Engine(self.buffer, [
            Rule("explore", ObjectKeyTrigger(POLICY, new_only=False), self._explore,
                 ready=self._actor_may_run),
            Rule("ingest", DataKeyTrigger(n=1), self._ingest,
                 ready=lambda: not self.engine.running("buffer")),
            Rule("sample", DataKeyTrigger(n=1, size=self.cfg.learning_starts, stream=MEMORY),
                 self._sample, ready=self._learner_may_sample),
            Rule("train", DataKeyTrigger(n=1, stream=SAMPLES), self._train,
                 ready=lambda: not self.engine.running("learner")),
        ], *job_clock(self.virtual, run.record.spec.seed))
        self._n = 0
        self._calls = math.ceil(self.cfg.steps_per_round / self.cfg.publish_every)  # a round's
        self._round = _Round()
        self._actors: set[int] = set()  # slots exploring now
        self._sampling: dict[int, int] = {}  # virtual clock: slot -> the version it explores
        self._explorations: dict[int, int] = {}  # per slot, invocations started
        self._env_steps = run.record.env_steps  # taken or being taken by actors
        self._started_steps = self._learner_steps  # gradient steps started (sampled for)
        self._priorities: str | None = None  # the learner's last |δ|, for the next sample
        self._learner_free_at: float | None = None
        self._failures: dict[str, int] = {}
        self._round_start = 0.0  # on the workflow's clock

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        spec = self.run.record.spec
        self.run.prewarm(spec.learner_function, 1)
        self.run.prewarm(spec.buffer_function, 1)

    async def reconcile(self, latest: int) -> None:
        """The learner published after the last recorded round: continue from there."""
        log.info("job %s: continuing from version %s, published mid-round", self.run.record.id,
                 latest)
        self.run.adopt(latest)

    async def reset(self) -> None:
        """Transitions no buffer took in are dropped; the memory itself lives on in the
        buffer container or its snapshot."""
        async with self.run.redis.pipeline(transaction=True) as pipe:
            drop_stream(pipe, self.run.record.id)
            await pipe.execute()
        self.buffer.clear()
        self._actors.clear()
        self._sampling.clear()
        self._priorities = None
        self._env_steps, self._started_steps = self.run.record.env_steps, self._learner_steps
        # The memory outlives this gateway (in the buffer container or its snapshot): the
        # learner may sample it again before any actor is let run ahead of the ratio.
        remembered = min(self.run.record.replay_inserted, self.cfg.memory_size)
        if remembered:
            self.buffer.streams[MEMORY] = [Item(entry="memory", slot=0, size=remembered)]

    async def interrupted(self, exc: Exception) -> None:
        await self.engine.cancel(("actor", "buffer", "learner"))
        await self.run.pause(str(exc))
        await self.run.with_redis(self.run.restore)

    async def finish(self) -> None:
        """Let the calls in flight end without their results (nothing trains on them any
        more), and bill them."""
        rec = self.run.record
        done = [r for r in await self.engine.settle(("actor", "buffer", "learner"))
                if isinstance(r, InvocationRecord)]
        self._actors.clear()
        self._sampling.clear()
        self.run.bill(actor_cost([r for r in done if r.function == rec.spec.actor_function],
                                 rec.spec.pricing))
        self.run.bill(learner_cost([r for r in done if r.function != rec.spec.actor_function],
                                   rec.spec.pricing))

    async def abandon(self) -> None:
        await self.engine.cancel(("actor", "buffer", "learner"))
        self._actors.clear()
        self._sampling.clear()

    # ------------------------------------------------------------------ a round
    @property
    def _learner_steps(self) -> int:
        return int(self.run.record.algorithm_state.get("learner_steps", 0))

    async def round(self) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        self._n, self._round = run.actors_for_round(), _Round()
        run.prewarm(spec.actor_function, self._n, placement=spec.placement.actors)
        self.buffer.publish(POLICY, rec.version or 0)
        t0, start = time.monotonic(), mark(self.engine)
        self._round_start = self._now()
        await self.engine.run(finished=lambda: len(self._round.trained) >= self._calls
                              or (self._past_limit() and not self._actors))
        await self._close(t0, start)

    def _past_limit(self) -> bool:
        """The job's env-step or time limit reached (see the module docstring)."""
        return self.run.past_limit(self._env_steps, self._now() - self._round_start)

    def _now(self) -> float:
        """The workflow's clock: the virtual one's, else real time."""
        return self.engine.now if self.virtual else time.monotonic()

    def _fail(self, kind: str, r: InvocationRecord) -> None:
        """Count a failed call; Redis being away cuts the round off, a function failing
        ``FAILURES_IN_A_ROW`` times in a row ends the job."""
        if unreachable(r):
            raise RedisDown(f"round {self.run.record.round}: {describe(r)}")
        self._round.errors.append(describe(r))
        self._failures[kind] = self._failures.get(kind, 0) + 1
        if self._failures[kind] >= FAILURES_IN_A_ROW:
            raise JobError(f"round {self.run.record.round}: {kind} failed "
                           f"{FAILURES_IN_A_ROW} times in a row; {describe(r)}")

    # -------------------------------------------------------------------- actors
    def _actor_may_run(self) -> bool:
        """An idle slot, the job short of its limits, and the actors not ahead of the learner
        by more than the ratio (or the memory below ``learning_starts``: warming up, or
        refilling after a restore that lost it)."""
        cfg, spec = self.cfg, self.run.record.spec
        batch = spec.envs_per_actor * spec.steps_per_actor
        lead = max(batch * self._n, 2 * cfg.publish_every / cfg.updates_per_step)
        allowed = cfg.learning_starts + self._learner_steps / cfg.updates_per_step + lead
        memory = self.buffer.pending(MEMORY)
        warming = not memory or memory[0].size < cfg.learning_starts
        return ((warming or self._env_steps < allowed) and not self._past_limit()
                and any(s not in self._actors for s in range(self._n)))

    def _explore(self, message: Message) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        # The idle slot that explored least: every ε gets its share of the env steps.
        slot = min((s for s in range(self._n) if s not in self._actors),
                   key=lambda s: self._explorations.get(s, 0))
        self._explorations[slot] = self._explorations.get(slot, 0) + 1
        self._actors.add(slot)
        self._env_steps += spec.envs_per_actor * spec.steps_per_actor
        args = explore_args(rec, run.credentials.to_args(), slot, self._n)

        def work() -> Awaitable[InvocationRecord]:
            """The newest version (on a virtual clock: the one current now, pinned)."""
            pinned = args
            if self.virtual:
                version = self._sampling[slot] = rec.version or 0
                pinned = args.model_copy(update={"version": version})
            return run.invoke(spec.actor_function, pinned.model_dump(mode="json"),
                              affinity=actor_affinity(rec.id, slot))

        self.engine.start("actor", work, lambda r: self._explored(slot, r))

    def _explored(self, slot: int, r: InvocationRecord) -> None:
        st, spec = self._round, self.run.record.spec
        self._actors.discard(slot)
        self._sampling.pop(slot, None)
        st.actors.append(r)
        if r.status != "success":
            self._env_steps -= spec.envs_per_actor * spec.steps_per_actor
            self._fail("actor", r)
            return
        self._failures["actor"] = 0
        out = result(ExploreResult, r)
        st.explored.append((slot, out))
        if out.entry is not None:
            self.buffer.put(TRAJECTORIES, Item(entry=out.entry, slot=slot,
                                               version=out.version, size=out.transitions))

    # -------------------------------------------------------------------- buffer
    def _ingest(self, message: Message) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        entries = [i.entry for i in self.buffer.drain(TRAJECTORIES)]
        args = ingest_args(rec, run.credentials.to_args(), entries, rec.replay_inserted)
        self.engine.start("buffer", lambda: run.invoke(spec.buffer_function,
                                                       args.model_dump(mode="json"),
                                                       affinity=f"{rec.id}:buffer"),
                          lambda r: self._ingested(r, entries))

    def _buffer_answered(self, out: IngestResult | SampleResult) -> None:
        """What every buffer answer says: the memory's size and what a restore lost."""
        st, rec = self._round, self.run.record
        if out.restored:
            st.restores += 1
            st.lost += out.lost
            log.warning("job %s: the buffer restored its snapshot; %d transitions lost",
                        rec.id, out.lost)
        self.run.adopt(replay_inserted=out.inserted)
        st.snapshot_s += out.snapshot_s or 0.0
        self.buffer.streams[MEMORY] = [Item(entry="memory", slot=0, size=out.size)]

    def _ingested(self, r: InvocationRecord, entries: list[str]) -> None:
        st = self._round
        st.buffer.append(r)
        if r.status != "success":  # its entries stay in the stream: take them in again
            for entry in entries:
                self.buffer.put(TRAJECTORIES, Item(entry=entry, slot=-1, size=1))
            self._fail("buffer", r)
            return
        self._failures["buffer"] = 0
        out = result(IngestResult, r)
        self._buffer_answered(out)
        st.rejected += [x.reason for x in out.rejected]

    def _learner_may_sample(self) -> bool:
        """No buffer call runs, no sample waits, and the learner is not ahead of the ratio."""
        cfg = self.cfg
        if self.engine.running("buffer") or self.buffer.pending(SAMPLES):
            return False
        fresh = self.run.record.replay_inserted - cfg.learning_starts
        allowed = max(cfg.publish_every, fresh * cfg.updates_per_step)
        return self._started_steps + cfg.publish_every <= allowed

    def _sample(self, message: Message) -> None:
        run, rec, spec, cfg = self.run, self.run.record, self.run.record.spec, self.cfg
        self._started_steps += cfg.publish_every
        args = sample_args(rec, run.credentials.to_args(), cfg.publish_every,
                           annealed_beta(cfg, self._learner_steps), self._priorities,
                           rec.replay_inserted)
        self._priorities = None
        self.engine.start("buffer", lambda: run.invoke(spec.buffer_function,
                                                       args.model_dump(mode="json"),
                                                       affinity=f"{rec.id}:buffer"),
                          self._sampled)

    def _sampled(self, r: InvocationRecord) -> None:
        st = self._round
        st.buffer.append(r)
        if r.status != "success":
            self._started_steps -= self.cfg.publish_every
            self._fail("buffer", r)
            return
        self._failures["buffer"] = 0
        out = result(SampleResult, r)
        self._buffer_answered(out)
        if out.key is None:  # the memory came back empty: no gradient steps on it
            self._started_steps -= self.cfg.publish_every
            return
        st.sampled.append(out)
        self.buffer.put(SAMPLES, Item(entry=out.key, slot=0, size=out.rows))

    # ------------------------------------------------------------------- learner
    def _train(self, message: Message) -> None:
        run, rec, spec = self.run, self.run.record, self.run.record.spec
        item: Item = message["items"][0]
        self.buffer.take(SAMPLES, [item])
        last = len(self._round.trained) + 1 >= self._calls
        args = train_args(rec, run.credentials.to_args(), rec.version or 0, item.entry, last)
        cores = run.learner_cores(self._n)

        def work() -> Awaitable[InvocationRecord]:
            """On a virtual clock: it publishes while actors that started earlier (in virtual
            time) may not have read their pinned version yet, so it keeps that one."""
            if self._learner_free_at is not None:
                self._round.learner_idle_s += self._now() - self._learner_free_at
            pinned = args
            if self.virtual:
                oldest = min(self._sampling.values(), default=args.version)
                pinned = args.model_copy(update={"keep": max(KEEP_VERSIONS,
                                                             args.version + 2 - oldest)})
            return run.invoke(spec.learner_function, pinned.model_dump(mode="json"),
                              affinity=f"{rec.id}:learner", cores=cores)

        self.engine.start("learner", work, lambda r: self._trained(r, item))

    def _trained(self, r: InvocationRecord, item: Item) -> None:
        st = self._round
        st.learners.append(r)
        self._learner_free_at = self._now()
        if r.status != "success":  # the sample is still in Redis: train on it again
            self.buffer.put(SAMPLES, item)
            self._fail("learner", r)
            return
        self._failures["learner"] = 0
        out = result(TrainResult, r)
        st.trained.append(out)
        self.run.adopt(out.version, out.algorithm_state)
        self._priorities = out.priorities
        self.buffer.publish(POLICY, out.version)

    # ------------------------------------------------------------------ the row
    async def _close(self, t0: float, start: Mark) -> None:
        rec, spec, st = self.run.record, self.run.record.spec, self._round
        explored = [out for _, out in st.explored]
        trained = [o.stats for o in st.trained]
        columns: dict[str, Any] = {
            rr.LEARNER_STEPS: self._learner_steps,
            rr.GRADIENT_STEPS: sum(o.steps for o in st.trained),
            rr.TRANSITIONS: sum(o.transitions for o in explored),
            rr.BUFFER_SIZE: st.sampled[-1].size if st.sampled else None,
            rr.REPLAY_INSERTED: rec.replay_inserted,
            rr.SAMPLED_PRIORITY_MEAN: mean([o.priority_mean for o in st.sampled]),
            rr.EDGE_PRIORITY_MEAN: mean([o.priority_mean for o in explored
                                        if o.priority_mean is not None]),
            rr.BYTES_TO_LEARNER: sum(o.bytes for o in st.sampled),
            rr.BYTES_FROM_ACTORS: sum(o.bytes for o in explored),
            rr.BYTES_PER_TRANSITION: st.sampled[-1].bytes_per_transition if st.sampled else None,
            rr.PRIORITIES_STALE: sum(o.priorities_stale for o in st.sampled),
            rr.LOST: st.lost, rr.BUFFER_RESTORES: st.restores, rr.SNAPSHOT_S: st.snapshot_s,
            rr.REJECTED: len(st.rejected), rr.LEARNER_IDLE_S: st.learner_idle_s,
            rr.LEARNER_S: sum(r.run_s for r in st.learners),
            rr.LEARNER_CORES: mean([r.cores for r in st.learners if r.cores is not None]),
            rr.LEARNER_DEVICE: st.trained[-1].device if st.trained else None,
            rr.BUFFER_S: sum(r.run_s for r in st.buffer),
            rr.ACTOR_ROLLOUTS: len(st.actors),
            rr.ACTOR_FAILURES: sum(r.status != "success" for r in st.actors),
            # the algorithm's own figures (loss, ...), averaged over the round's learner calls
            **{key: mean([float(s[key]) for s in trained if key in s])
               for key in dict.fromkeys(k for s in trained for k in s)},
        }
        if self.virtual:
            columns.update(round_columns(self.engine, start, st.actors, spec.pricing))
        if st.rejected:
            columns[rr.REJECTED_REASONS] = st.rejected[:5]
        if st.errors:
            columns[rr.ERROR] = st.errors[0]
        greedy = algorithm(spec.algorithm).greedy_slot(self._n)
        target_returns = None if greedy is None else \
            [ret for slot, out in st.explored if slot == greedy for ret, _ in out.episodes]
        await self.run.close_round(RoundOutcome(
            round=rec.round, actors=self._n, version=rec.version or 0, started=t0,
            rollouts=[r for r in st.actors if r.status == "success"],
            invocations=[*st.actors, *st.buffer, *st.learners],
            costs={rr.COST_ACTORS: actor_cost(st.actors, spec.pricing),
                   rr.COST_LEARNER: learner_cost(st.learners, spec.pricing),
                   rr.COST_BUFFER: parameter_cost(st.buffer, spec.pricing)},
            columns=columns, target_returns=target_returns,
            env_starts=[slot for slot, out in st.explored if out.envs_started]))
