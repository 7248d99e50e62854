"""A job's run, whatever its workflow: the one start, stop, pause, restore, checkpoint and
metrics-row path, as an asyncio task in the gateway.

The run owns what every workflow shares: the record and its accounting, the controller (asked
for I_k once per round), the stop conditions and target confirmation, evaluations, the job's
Redis user, pausing while Redis is unreachable (its own writes are idempotent and retried), disk
checkpoints and resuming from Redis or from them, and the metrics row. The workflow
(:mod:`faasrl.workflow.sync`, :mod:`faasrl.workflow.stellaris`) owns what happens inside a round:
its rules, the functions they invoke and the row's own columns. The run does no tensor work,
so the gateway needs no torch.

Faults: a workflow invokes through :meth:`JobRun.invoke_until_done`, which retries an
invocation that failed for want of Redis once Redis answers again; a round that meets an
unreachable Redis where it cannot simply retry pauses and then runs again (see the workflow's
``interrupted``), so no round is lost or counted twice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from redis.asyncio import Redis

from faasrl import round_row as rr
from faasrl.contracts import EvaluateResult, InitResult
from faasrl.controllers import Controller, RoundContext, build_controller
from faasrl.data import acl
from faasrl.data.connection import UNREACHABLE, UNREACHABLE_NAMES
from faasrl.data.health import OUTAGE_MAX_S, RedisHealth
from faasrl.data.keys import env_code_key, latest_key, optimizer_keys, params_key
from faasrl.data.ops import put_weights
from faasrl.invoker import InvocationRecord, Invoker, InvokerError
from faasrl.invoker.errors import QuotaExceeded
from faasrl.invoker.invoker import placement_of
from faasrl.invoker.registry import CodeStore
from faasrl.invoker.tenant import Tenant
from faasrl.jobs import videos
from faasrl.jobs.admission import Admission
from faasrl.jobs.checkpoint import read_checkpoint, write_checkpoint
from faasrl.jobs.contract_args import evaluate_args, init_args, result
from faasrl.jobs.cost import serverful_cost
from faasrl.jobs.parallel import parallel_cost_usd, parallel_round_s
from faasrl.jobs.store import (
    TARGET_REACHED,
    Evaluation,
    JobRecord,
    JobStore,
    Serving,
    policy_function,
    reached_target,
)
from faasrl.jobs.videos import VideoStatus
from faasrl.rl.seeds import Purpose, evaluation_seeds
from faasrl.round_row import RoundRow
from faasrl.workflow.virtual_job import virtual_view

if TYPE_CHECKING:
    from faasrl.jobs.tensorboard import EventLog

log = logging.getLogger(__name__)

# The gateway's serve-rule publisher: the latest version of a job to its alias, and where.
Publish = Callable[[JobRecord], Awaitable[Serving]]
CONFIRM_GAP = 5  # rounds between evaluations that try to confirm a reached target
REDIS_ATTEMPTS = 5  # invocations of a function that keeps finding Redis unreachable
# what a resume from a disk checkpoint brings back
RESTORED_FIELDS = ("round", "version", "env_steps", "env_restarts", "wall_s", "cost_usd",
                   "serverful_cost_usd", "parallel_wall_s", "parallel_cost_usd",
                   "recent_returns", "algorithm_state", "controller_state", "last_row", "policy",
                   "parameter_state", "replay_inserted", "confirmation")
T = TypeVar("T")


class JobError(RuntimeError):
    """A round could not complete; the message says which function failed and why."""


class RedisDown(RuntimeError):
    """A function could not reach Redis: the round waits for it, then runs again."""


def unreachable(rec: InvocationRecord) -> bool:
    """Whether an invocation failed because Redis did not answer (its retries ran out)."""
    return rec.status != "success" and (rec.error or {}).get("type") in UNREACHABLE_NAMES


def actor_affinity(job_id: str, slot: int) -> str:
    """The affinity key of a job's actor slot: its invocations go back to the container that
    keeps the slot's envs and the job's policy warm."""
    return f"{job_id}:actor:{slot}"


def describe(rec: InvocationRecord) -> str:
    err = rec.error or {}
    return f"{rec.function} ({rec.status}): {err.get('type', '?')}: {err.get('message', '')}"


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


class Workflow(Protocol):
    """What happens inside a job's rounds (see :mod:`faasrl.workflow`)."""

    async def start(self) -> None:
        """Before the policy is built or restored: pre-warm what the workflow keeps warm."""

    async def reconcile(self, latest: int) -> None:
        """Redis holds policy ``latest``, not the recorded version: a round was cut off."""

    async def reset(self) -> None:
        """After a restore: drop what a cut-off round left in the data plane."""

    async def round(self) -> None:
        """Run round ``record.round``; it ends with :meth:`JobRun.close_round`."""

    async def interrupted(self, exc: Exception) -> None:
        """Redis went away mid-round: wait for it (``JobRun.pause``) so the round reruns."""

    async def finish(self) -> None:
        """The rounds are over: let work in flight end and bill it."""

    async def abandon(self) -> None:
        """The job was cancelled or failed: drop work in flight."""


@dataclass
class RoundOutcome:
    """What a round did, for its row and the record: the workflow's own columns, the
    successful rollouts (their summaries carry episodes and steps) and the costs."""

    round: int
    actors: int
    version: int
    started: float  # time.monotonic() at the round's start
    rollouts: list[InvocationRecord]
    invocations: list[InvocationRecord]  # every one billed, for cold starts and queueing
    costs: dict[str, float]  # row column -> dollars (cost_actors, cost_learner, ...)
    columns: dict[str, Any] = field(default_factory=dict)
    # The episodes that count toward target_reward (None: every rollout's). Ape-X's actors
    # explore with ε from 0.4 down: an off-policy job counts its greediest actor's.
    target_returns: list[float] | None = None
    # Actor slots whose envs started afresh in the round (the rollouts' ``envs_started``).
    env_starts: list[int] = field(default_factory=list)
    # The learner's state after the round, where the workflow has not adopted it already.
    algorithm_state: dict[str, Any] | None = None


class JobRun:
    def __init__(self, record: JobRecord, *, store: JobStore, invoker: Invoker, redis: Redis,
                 checkpoints: Path, workflow: Callable[[JobRun], Workflow],
                 schedulers: Path | None = None, health: RedisHealth | None = None,
                 outage_max_s: float = OUTAGE_MAX_S, admission: Admission | None = None,
                 publish: Publish | None = None):
        self.record = record
        self.publish = publish  # the serve rule's publisher (None: no gateway to serve)
        self.admission = admission  # its namespace's jobs and spend quotas (None: none)
        self.store = store
        self.invoker = invoker
        self.redis = redis
        self.health = health
        self.outage_max_s = outage_max_s
        self.schedulers = schedulers
        self.folder = checkpoints / record.id
        self.credentials = acl.JobCredentials.new(record.id)  # its functions' Redis user
        self.tenant = Tenant.of_job(record.id, record.namespace, record.spec.priority)
        self.paused_s = 0.0  # time spent waiting for Redis (reset per row)
        self.stop_requested: str | None = None  # the status to end with: see _stop_if_requested
        self.history: list[dict[str, Any]] = []
        self.controller: Controller = build_controller(record.spec.controller,
                                                       schedulers=schedulers)
        self.workflow = workflow(self)
        self._next_confirm = 0  # first round at which a reached target may be evaluated
        # (round, actors, the controller's explanation, seconds it took) of the round's decision
        self._planned: tuple[int, int, dict[str, Any], float] | None = None
        self._events: EventLog | None = None  # the TensorBoard log, when the spec asks for one
        self._env_slots: set[int] = set()  # actor slots that have had envs in this job

    # ------------------------------------------------------------------- the job
    async def run(self) -> None:
        rec, spec = self.record, self.record.spec
        await self._admit()
        rec.status, rec.error, rec.stop_reason, rec.held = "running", None, None, None
        rec.started_at = rec.started_at or time.time()
        self._clock, self._wall_before = time.monotonic(), rec.wall_s
        try:
            await self.with_redis(lambda: self.store.save(rec))
            await self.with_redis(self.grant)
            self.controller.load_state_dict(rec.controller_state)
            self.history = await self.with_redis(lambda: self.store.rows(rec.id))
            # A resumed job's slots below the most actors a round had have had envs already.
            self._env_slots = set(range(max((r["actors"] for r in self.history), default=0)))
            if spec.tensorboard:
                self._events = await asyncio.to_thread(self._open_event_log)
            # The actors start while the learner builds the initial policy, not after it.
            self.prewarm(spec.actor_function, self.actors_for_round(),
                         placement=spec.placement.actors)
            await self.workflow.start()
            if rec.version is None:
                await self._initialize()
            else:
                await self.with_redis(self.restore)
            await self._write_events(lambda events: events.start_after(rec.env_steps,
                                                                       time.time()))
            while (reason := await self._stop_reason()) is None:
                self._stop_if_requested()
                await self._within_spend()
                await self.with_redis(self.grant)  # a restarted Redis forgot the user
                try:
                    await self.workflow.round()
                except (RedisDown, *UNREACHABLE) as exc:
                    await self.workflow.interrupted(exc)
            await self.workflow.finish()
            rec.stop_reason = self._short_of_target(reason)
            if spec.evaluation_episodes:  # also after a confirmation: it chose when to stop
                rec.evaluation = await self._evaluate("final")
            if spec.evaluation.video:
                rec.video = await self.with_redis(self._record_videos)
            if spec.serve is not None:
                await self._publish()  # the final version, unless published already
            rec.status = "succeeded"
        except asyncio.CancelledError:
            rec.status = self.stop_requested or "cancelled"
            raise
        except Exception as exc:
            log.warning("job %s failed: %s", rec.id, exc)
            rec.status, rec.error = "failed", str(exc)
        finally:
            if self.admission is not None:
                self.admission.leave(rec.id, rec.namespace)
            if self._events is not None:
                await asyncio.to_thread(self._events.close)
            await self.workflow.abandon()
            self._advance_wall()
            if rec.status != "interrupted":
                rec.finished_at = time.time()
            await self._save_final()

    async def _admit(self) -> None:
        """Wait (``pending``, ``held`` saying why) until the namespace's quota of concurrent
        jobs lets this one run; a job stopped meanwhile ends as its stop asks."""
        rec = self.record
        if self.admission is None:
            return

        async def hold(why: str) -> None:
            rec.status, rec.held = "pending", why
            await self.with_redis(lambda: self.store.save(rec))

        try:
            await self.admission.enter(rec.id, rec.namespace, rec.created_at, hold)
        except asyncio.CancelledError:
            rec.status, rec.held = self.stop_requested or "cancelled", None
            if rec.status != "interrupted":
                rec.finished_at = time.time()
            try:
                await self.store.save(rec)
            except UNREACHABLE as exc:
                log.error("job %s: could not save its end (%s)", rec.id, exc)
            raise

    async def _within_spend(self) -> None:
        """Before a round: ``paused`` while the namespace's spend over the last 24 h is at its
        quota. The pause is no run time (its wall clock stops)."""
        rec = self.record
        if self.admission is None:
            return
        t0 = time.monotonic()

        async def hold(why: str) -> None:
            rec.status, rec.held = "paused", why
            await self.with_redis(lambda: self.store.save(rec))

        await self.admission.within_spend(rec.namespace, hold)
        if rec.status == "paused":
            self._clock += time.monotonic() - t0
            rec.status, rec.held = "running", None
            await self.with_redis(lambda: self.store.save(rec))

    def _advance_wall(self, saved_s: float = 0.0) -> None:
        """The measured wall moves to now; the modeled-parallel one (``jobs/parallel.py``) as
        far, less the waits the model took out of the round just closed."""
        rec, wall = self.record, self.wall()
        rec.parallel_wall_s += wall - rec.wall_s - saved_s
        rec.wall_s = wall

    async def _save_final(self) -> None:
        """Save the job's end (and checkpoint it), and take its functions' Redis user away.
        With Redis gone, the job keeps its last saved round (it is still 'running' there),
        and the next gateway resumes it."""
        rec = self.record
        try:
            await self.store.save(rec)
            if rec.version is not None:
                await self._checkpoint()
            await acl.revoke(self.redis, rec.id)
        except UNREACHABLE as exc:
            log.error("job %s: could not save its end (%s): Redis is unreachable; it resumes "
                      "from its last saved round", rec.id, exc)

    async def grant(self) -> None:
        """(Re)create the job's Redis user for its functions, and put its env's code where
        they read it (a restarted Redis lost both; idempotent)."""
        await acl.grant(self.redis, self.record.id, self.credentials)
        await self._put_env_code()

    async def _put_env_code(self) -> None:
        """The env's archive under the job's prefix, the only keys its functions reach:
        copied from the uploaded code once per Redis life (one EXISTS per round after)."""
        env, rec = self.record.spec.env, self.record
        if env is None or env.code_sha256 is None or await self.redis.exists(
                env_code_key(rec.id)):
            return
        data = await CodeStore(self.redis).get(env.code_sha256)
        if data is None:
            raise JobError(f"env.code_sha256: the env's code archive {env.code_sha256} is gone "
                           "(upload it again: POST /v1/code)")
        await self.redis.set(env_code_key(rec.id), data)

    async def with_redis(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run one of the run's own (idempotent) Redis operations; while Redis is unreachable
        the job pauses, and the operation runs again when it is back."""
        while True:
            try:
                return await op()
            except UNREACHABLE as exc:
                await self.pause(f"Redis is unreachable ({exc})")

    async def pause(self, why: str) -> None:
        """Wait (at most ``outage_max_s``) until Redis answers; then grant the job's user
        again, since a restarted Redis has none."""
        rec, t0 = self.record, time.monotonic()
        log.warning("job %s paused: %s", rec.id, why)
        while True:
            if self.health is None:
                await asyncio.sleep(0.5)
                up = True
            else:
                up = await self.health.wait_up(max(0.0, self.outage_max_s - (time.monotonic()
                                                                               - t0)))
            if not up:
                raise JobError(f"Redis stayed unreachable for {self.outage_max_s:g} s ({why})")
            try:
                await self.grant()
                break
            except UNREACHABLE:
                if time.monotonic() - t0 > self.outage_max_s:
                    raise JobError(f"Redis stayed unreachable for {self.outage_max_s:g} s "
                                   f"({why})") from None
                await asyncio.sleep(0.2)
        self.paused_s += time.monotonic() - t0
        log.warning("job %s continues after %.1f s without Redis", rec.id,
                    time.monotonic() - t0)

    def _stop_if_requested(self) -> None:
        """The manager cancels the run's task and also sets ``stop_requested``, checked here
        between rounds: a cancellation can be lost, since Python 3.11's ``asyncio.wait_for``
        (which redis-py awaits on each command it sends) drops one that arrives as its inner
        await finishes, and the job would then run on."""
        if self.stop_requested is not None:
            raise asyncio.CancelledError

    async def _stop_reason(self) -> str | None:
        rec, stop = self.record, self.record.spec.stop
        if (reached := await self._target_reached()) is not None:
            return reached
        if stop.max_rounds is not None and rec.round >= stop.max_rounds:
            return f"max_rounds ({stop.max_rounds}) done"
        if (limit := self._limit_reached(rec.env_steps, 0.0)) is not None:
            return limit
        on = "" if rec.spec.virtual is None else " on the virtual clock"
        if stop.budget_usd is not None and self._spent()[1] >= stop.budget_usd:
            return f"budget (${stop.budget_usd:g}) spent{on}"
        if self.actors_for_round() == 0:
            return "the controller ended the job: the budget left cannot pay for another round"
        return None

    def _short_of_target(self, reason: str) -> str:
        """The stop reason of a job that ended for another reason than its target reward says
        that it did not reach it: "succeeded" is only that the job ran to a stop."""
        rec, target = self.record, self.record.spec.stop.target_reward
        if target is None or reached_target(reason):
            return reason
        mean_ = rec.recent_mean_return
        seen = "no episode ended" if mean_ is None else f"training mean {mean_:.1f}"
        return f"{reason}; target reward {target:g} not reached ({seen})"

    async def _target_reached(self) -> str | None:
        """Whether the policy reached ``target_reward``.

        Training returns come from several recent versions of a sampling policy, so a window
        that reaches the target is confirmed by evaluating the current version on the
        confirmation seeds (when the job evaluates at all); a failed confirmation is retried
        only ``CONFIRM_GAP`` rounds later. The job reports its final evaluation, on held-out
        seeds, instead: the confirmation's mean is the one that passed, so it is biased up.
        """
        rec, spec = self.record, self.record.spec
        target, mean_ = spec.stop.target_reward, rec.recent_mean_return
        if (target is None or mean_ is None or len(rec.recent_returns) < spec.stop.target_window
                or mean_ < target):
            return None
        reached = f"{TARGET_REACHED}: training mean {mean_:.1f} over " \
                  f"{spec.stop.target_window} episodes"
        if not spec.stop.confirm_target or not spec.evaluation_episodes:
            return reached
        if rec.round < self._next_confirm:
            return None
        rec.confirmation = confirmation = await self._evaluate("confirmation")
        await self.with_redis(lambda: self.store.save(rec))
        if confirmation.mean >= target:
            return f"{reached}, confirmation mean {confirmation.mean:.1f} over " \
                   f"{confirmation.episodes}"
        self._next_confirm = rec.round + CONFIRM_GAP
        return None

    # --------------------------------------------------------- the controller
    def actors_for_round(self) -> int:
        """I_k for the current round, asked of the controller once per round (0: stop)."""
        rec = self.record
        if self._planned is None or self._planned[0] != rec.round:
            t0 = time.perf_counter()
            n = max(0, self.controller.actors(self.context(rec.round)))
            self._planned = (rec.round, n, self.controller.explain(), time.perf_counter() - t0)
        return self._planned[1]

    def context(self, round_: int, partial: dict[str, Any] | None = None) -> RoundContext:
        """What the controller sees before ``round_``; for a forecast, ``partial`` is the
        running round's row so far (its actors' results)."""
        rec, stop = self.record, self.record.spec.stop
        history = self.history if partial is None else [*self.history, partial]
        if rec.spec.virtual is not None:  # the modeled cluster's time and cost
            history = [virtual_view(r) for r in history]
        spent = self._spent()[1] + (history[-1].get(rr.COST_ACTORS, 0.0) if partial else 0.0)
        left = None if stop.budget_usd is None else stop.budget_usd - spent
        return RoundContext(round_, history, left, stop.budget_usd, stop.target_reward,
                            rec.spec.seed)

    # -------------------------------------------------------------- a round's end
    def adopt(self, version: int | None = None, algorithm_state: dict[str, Any] | None = None,
              *, parameter_state: dict[str, Any] | None = None,
              replay_inserted: int | None = None) -> None:
        """What the job trains on now, on the record, which the next invocations' arguments,
        restores and checkpoints read: the policy's version, the learner's and the parameter
        function's state, the transitions the replay memory took in (each where given). A
        workflow adopts as its functions answer (a checkpoint at a cancel mid-round saves the
        newest), and every round's close adopts its version: the record's training state is
        written here alone."""
        rec = self.record
        if version is not None:
            rec.version = version
        if algorithm_state is not None:
            rec.algorithm_state = algorithm_state
        if parameter_state is not None:
            rec.parameter_state = parameter_state
        if replay_inserted is not None:
            rec.replay_inserted = replay_inserted

    def bill(self, usd: float) -> None:
        """Invocations no round closes (the ones in flight when the job stops) cost too."""
        self.record.cost_usd += usd

    async def close_round(self, outcome: RoundOutcome) -> None:
        """Account a finished round on the record and append its row, once, whatever Redis
        does: the one metrics-row builder every workflow ends its rounds with."""
        rec, spec = self.record, self.record.spec
        summaries = [r.result for r in outcome.rollouts]
        returns = [float(ret) for s in summaries for ret, _ in s["episodes"]]
        steps = sum(int(s["steps"]) for s in summaries)
        run_times = [r.run_s for r in outcome.rollouts]
        cost_round = sum(outcome.costs.values())
        round_s, ended = time.monotonic() - outcome.started, time.time()
        parallel_s = parallel_round_s(outcome.invocations, ended - round_s, ended)
        parallel_cost = parallel_cost_usd(outcome.invocations, spec.actor_function, spec.pricing)
        rec.round = outcome.round + 1
        self.adopt(outcome.version, outcome.algorithm_state)
        rec.env_steps += steps
        restarts = 0
        for slot in outcome.env_starts:  # in order: a slot may start envs twice in a round
            restarts += slot in self._env_slots
            self._env_slots.add(slot)
        rec.env_restarts += restarts
        counted = returns if outcome.target_returns is None else outcome.target_returns
        rec.recent_returns = (rec.recent_returns + counted)[-spec.stop.target_window:]
        rec.cost_usd += cost_round
        rec.parallel_cost_usd += parallel_cost
        self._advance_wall(saved_s=round_s - parallel_s)
        rec.serverful_cost_usd = serverful_cost(rec.wall_s, spec.pricing)
        rec.controller_state = self.controller.state_dict()
        _, _, decision, decision_s = self._planned or (outcome.round, outcome.actors, {}, 0.0)
        row = RoundRow(
            round=outcome.round, actors=outcome.actors, version=rec.version,
            env_steps=steps, total_env_steps=rec.env_steps, episodes=len(returns),
            mean_return=mean(returns), max_return=max(returns) if returns else None,
            recent_mean_return=rec.recent_mean_return,
            round_s=round_s, parallel_round_s=parallel_s,
            actor_s_max=max(run_times, default=0.0), actor_s_mean=mean(run_times),
            cold_starts=sum(r.cold for r in outcome.invocations),
            env_restarts=restarts,
            # What the actors said stepped their envs (one job, one backend; None: none said).
            env_backend=next((s["env_backend"] for s in summaries if s.get("env_backend")),
                             None),
            queue_s_max=max((r.queue_s for r in outcome.invocations), default=0.0),
            queue_s=self._capacity_waits(outcome.invocations),
            actor_s=sum(r.run_s for r in outcome.invocations
                        if r.function == spec.actor_function),
            share=asdict(self.invoker.share(self.tenant)),
            paused_s=self.paused_s, controller=decision, controller_s=decision_s,
            columns=outcome.columns, costs=outcome.costs, cost_round=cost_round,
            cost_total=rec.cost_usd, serverful_cost_total=rec.serverful_cost_usd,
            parallel_cost_round=parallel_cost, parallel_cost_total=rec.parallel_cost_usd,
            wall_s=rec.wall_s, parallel_wall_s=rec.parallel_wall_s,
        ).flat()
        rec.last_row = row
        self.history.append(row)
        self.paused_s = 0.0
        index = len(self.history) - 1
        await self.with_redis(lambda: self.store.save_round(rec, row, index))
        if self.admission is not None:
            await self.with_redis(lambda: self.admission.spent(
                rec.namespace, rec.id, outcome.round, cost_round, ended))
        await self._log_row(row, ended)
        if rec.round % spec.checkpoint_every == 0:
            await self.with_redis(self._checkpoint)
        if spec.serve is not None and rec.round % spec.serve.every == 0:
            await self._publish()

    async def _publish(self) -> None:
        """The serve rule: publish the latest version to its alias (``JobManager.publish``,
        the gateway's). A failure is the record's ``serving.error``, never the job's."""
        rec, serve = self.record, self.record.spec.serve
        if self.publish is None or serve is None or rec.version is None:
            return
        last = rec.serving
        if last is not None and last.error is None and last.model_version == rec.version:
            return
        try:
            rec.serving = await self.publish(rec)
        except Exception as exc:  # serving must not stop training
            log.warning("job %s: publishing version %s to alias %s failed: %s", rec.id,
                        rec.version, serve.alias, exc)
            last = last or Serving(function=policy_function(rec.id, serve.name),
                                   alias=serve.alias)
            rec.serving = last.model_copy(update={"error": f"version {rec.version}: {exc}"})

    def _capacity_waits(self, records: list[InvocationRecord]) -> dict[str, float]:
        """Per phase (actors, learner, parameter, buffer: as the cost columns name them), the
        seconds its invocations waited for capacity (cold starts left out)."""
        spec = self.record.spec
        phase = {spec.actor_function: "actors", spec.learner_function: "learner",
                 spec.parameter_function: "parameter", spec.buffer_function: "buffer"}
        waits: dict[str, float] = {}
        for r in records:
            name = phase.get(r.function, r.function)
            waits[name] = waits.get(name, 0.0) + r.capacity_wait_s
        return waits

    def _open_event_log(self) -> EventLog | None:
        """The job's TensorBoard log (tensorboard is imported here: only jobs that ask for a
        log load it into the gateway); None where it cannot be written, which gives up the
        log, not the job: the rows stay in Redis, and `faasrl jobs export` writes them later.
        """
        from faasrl.jobs.tensorboard import FOLDER, EventLog

        try:
            return EventLog(self.folder / FOLDER)
        except OSError as exc:
            log.warning("job %s: no TensorBoard log: %s", self.record.id, exc)
            return None

    async def _log_row(self, row: dict[str, Any], wall_time: float) -> None:
        """Append the row to the TensorBoard log, if the job keeps one."""
        await self._write_events(lambda events: events.add_row(row, wall_time))

    async def _write_events(self, write: Callable[[EventLog], None]) -> None:
        """``write`` to the TensorBoard log, if the job keeps one; a write that fails gives
        the log up (see :meth:`_open_event_log`)."""
        if (events := self._events) is None:
            return
        try:
            await asyncio.to_thread(write, events)
        except OSError as exc:
            log.warning("job %s: TensorBoard log given up: %s", self.record.id, exc)
            self._events = None

    # ---------------------------------------------------------------- invoking
    def prewarm(self, function: str, n: int, placement: str | None = None) -> None:
        """Start containers ahead for the job: a job of a higher priority may preempt them
        while they serve nobody yet."""
        self.invoker.prewarm(function, n, placement=placement, tenant=self.tenant)

    def learner_cores(self, actors: int) -> float:
        """What the learner may ask for where the job lends it its actors' cores: its own and
        ``actors`` actors', which wait for it (lent where free, up to its manifest's
        ``cpu_max``); 0: its own. Not where the actors run elsewhere (Lambda), nor on the
        virtual clock, whose learner has its own cores."""
        spec = self.record.spec
        actor = self.invoker.spec(spec.actor_function)
        if (not spec.lends_actor_cores or spec.virtual is not None
                or placement_of(actor, spec.placement.actors) != "local"):
            return 0.0
        return self.invoker.spec(spec.learner_function).cpu + actors * actor.cpu

    async def invoke(self, function: str, args: dict[str, Any], affinity: str | None = None,
                     cores: float = 0.0) -> InvocationRecord:
        """``cores``: what it may use in all where they are free (``Invoker.invoke``)."""
        spec = self.record.spec
        # Actors go where the job places them; learners always run locally.
        placement = spec.placement.actors if function == spec.actor_function else "local"
        while True:
            try:
                return await self.invoker.invoke(function, args, affinity=affinity,
                                                 placement=placement, tenant=self.tenant,
                                                 cores=cores)
            except QuotaExceeded as exc:
                if not exc.waited:  # it could never fit
                    raise JobError(f"{function}: {exc.kind}: {exc.message}") from exc
                # A job waits out its namespace's quota: it queues again.
                log.info("job %s: %s; queueing again", self.record.id, exc.message)
            except InvokerError as exc:
                raise JobError(f"{function}: {exc.kind}: {exc.message}") from exc

    async def invoke_until_done(self, function: str, args: dict[str, Any], *,
                                affinity: str | None = None, retries: int = 0,
                                cores: float = 0.0) -> list[InvocationRecord]:
        """Invoke until it succeeds: ``retries`` more times after any failure, and after one
        for want of Redis (up to ``REDIS_ATTEMPTS`` in all) once Redis answers again. Returns
        every attempt's record (the caller bills them all and reads the last)."""
        records: list[InvocationRecord] = []
        while True:
            r = await self.invoke(function, args, affinity=affinity, cores=cores)
            records.append(r)
            if r.status == "success":
                return records
            redis_down = unreachable(r)
            failures = sum(not unreachable(x) for x in records)
            if failures > retries or len(records) >= max(REDIS_ATTEMPTS, retries + 1):
                return records
            log.warning("job %s: %s; invoking it again", self.record.id, describe(r))
            if redis_down:
                await self.pause(f"{function} could not reach Redis")

    # ------------------------------------------------- the policy: build, restore, save
    async def _initialize(self) -> None:
        """The learner builds the seeded initial policy and publishes it as version 0."""
        rec = self.record
        args = init_args(rec, self.credentials.to_args())
        out = (await self.invoke_until_done(rec.spec.learner_function,
                                            args.model_dump(mode="json")))[-1]
        if out.status != "success":
            raise JobError(f"initializing the policy: {describe(out)}")
        init = result(InitResult, out)
        rec.policy = init.policy
        self.adopt(init.version, init.algorithm_state)
        await self.with_redis(lambda: self.store.save(rec))

    async def restore(self) -> None:
        """Continue from the last recorded state: the policy in Redis, or the disk checkpoint
        when Redis lost it; then the workflow drops what a cut-off round left."""
        rec = self.record
        latest = await self.redis.get(latest_key(rec.id))
        if latest is None:
            await self._restore_from_disk()
        elif int(latest) != rec.version:
            await self.workflow.reconcile(int(latest))
        await self.workflow.reset()

    async def _restore_from_disk(self) -> None:
        """Redis lost the job's weights: put the disk checkpoint's record fields, weights and
        optimizer back."""
        rec = self.record
        saved = await asyncio.to_thread(read_checkpoint, self.folder)
        if saved is None:
            raise JobError(f"job {rec.id}: no weights in Redis and no checkpoint in "
                           f"{self.folder}")
        record_json, weights, optimizer = saved
        disk = JobRecord.model_validate_json(record_json)
        for name in RESTORED_FIELDS:
            setattr(rec, name, getattr(disk, name))
        async with self.redis.pipeline(transaction=True) as pipe:
            put_weights(pipe, rec.id, rec.version, weights, optimizer=optimizer)
            await pipe.execute()
        self._wall_before = rec.wall_s

    async def _evaluate(self, purpose: Purpose) -> Evaluation:
        """The current version's evaluation on ``purpose``'s seeds. Its episodes are split in
        contiguous seed ranges among as many actor invocations as the last round ran, played
        at once (each episode is its seed's wherever it runs, so the returns are the same as
        one invocation's, in seed order)."""
        rec = self.record
        args = evaluate_args(rec, self.credentials.to_args(), purpose)
        parts = max(1, min(args.episodes, self._planned[1] if self._planned else 1))
        bounds = [args.episodes * i // parts for i in range(parts + 1)]
        calls = [args.model_copy(update={"seed": args.seed + lo, "episodes": hi - lo})
                 for lo, hi in itertools.pairwise(bounds)]
        attempts = await asyncio.gather(*(
            self.invoke_until_done(rec.spec.actor_function, call.model_dump(mode="json"),
                                   affinity=actor_affinity(rec.id, slot))
            for slot, call in enumerate(calls)))
        returns: list[float] = []
        for records in attempts:
            if (out := records[-1]).status != "success":
                raise JobError(f"{purpose} evaluation: {describe(out)}")
            returns += result(EvaluateResult, out).returns
        return Evaluation(version=rec.version or 0, episodes=len(returns), first_seed=args.seed,
                          mean=statistics.fmean(returns),
                          std=statistics.pstdev(returns) if len(returns) > 1 else 0.0,
                          min=min(returns), max=max(returns), returns=returns)

    async def _record_videos(self) -> VideoStatus:
        """The final version's episodes on video (the final evaluation's first seeds); a
        video that cannot be made is said, not a failed job."""
        rec = self.record
        blob = await self.redis.get(params_key(rec.id, rec.version))
        if rec.version is None or blob is None:
            return VideoStatus(status="unavailable", message="the job has no weights")
        try:
            made = await videos.record_version(
                rec, blob, rec.version, self.folder.parent,
                env_archive=await self.redis.get(env_code_key(rec.id)),
                episodes=rec.spec.evaluation.episodes,
                seed=evaluation_seeds(rec.spec.seed, "final", 1)[0], source="evaluation")
        except videos.RecordingFailed as exc:
            return VideoStatus(status="failed", message=str(exc))
        if isinstance(made, str):
            return VideoStatus(status="unavailable", message=made)
        return VideoStatus(status="recorded", videos=[v.n for v in made])

    async def _checkpoint(self) -> None:
        rec = self.record
        weights = await self.redis.get(params_key(rec.id, rec.version))
        if weights is None:
            return
        optimizer = await self.redis.get(optimizer_keys(rec.id)[0])
        await asyncio.to_thread(write_checkpoint, self.folder, rec.model_dump_json(), weights,
                                optimizer)

    def past_limit(self, env_steps: int, round_s: float) -> bool:
        """Whether a round still running has taken the job to its ``max_env_steps``
        (``env_steps``: the job's, the round's included) or its ``max_wall_s`` (``round_s``:
        the round so far, on the workflow's clock). An off-policy round asks, as its length is
        gradient steps, and a warm-up before ``learning_starts`` can outlast either."""
        return self._limit_reached(env_steps, round_s) is not None

    def _limit_reached(self, env_steps: int, round_s: float) -> str | None:
        """Why the job is at its env-step or time limit (None: it is not); ``round_s`` is the
        time of a round still running, which a virtual clock's rows do not hold yet."""
        rec, stop = self.record, self.record.spec.stop
        if stop.max_env_steps is not None and env_steps >= stop.max_env_steps:
            return f"max_env_steps ({stop.max_env_steps}) reached"
        if stop.max_wall_s is None:  # spare the virtual clock's sum over the rows
            return None
        if rec.spec.virtual is None:
            seconds, on = self.wall(), ""
        else:
            seconds, on = self._spent()[0] + round_s, " on the virtual clock"
        return f"max_wall_s ({stop.max_wall_s:g}) reached{on}" \
            if seconds >= stop.max_wall_s else None

    def _spent(self) -> tuple[float, float]:
        """The job's time and cost so far, which its stops and its controller's budget go by:
        measured, or on a virtual clock the modeled cluster's (its rows' sums)."""
        if self.record.spec.virtual is None:
            return self.wall(), self.record.cost_usd
        return (sum(r.get(rr.VIRTUAL_S, 0.0) for r in self.history),
                sum(r.get(rr.VIRTUAL_COST_ROUND, 0.0) for r in self.history))

    def wall(self) -> float:
        return self._wall_before + (time.monotonic() - self._clock)

