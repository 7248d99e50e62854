"""The job driver: one synchronous PPO job, round by round, as an asyncio task in the gateway.

A round k (the MinionsRL/Nitro loop):
  1. the controller picks I_k, the number of actors (and the driver pre-warms them and the
     learner);
  2. I_k actor functions run concurrently, each with policy version k: it rolls out its envs
     (kept warm in its container), writes one trajectory blob to the job's stream in Redis and
     returns a small summary;
  3. the learner function reads the round's blobs, runs the PPO update, publishes version k+1 and
     measures what the controller asked for (Hessian eigenvalues, gradient noise scale); while it
     runs, the driver pre-warms the actors the controller forecasts for round k+1 (predictive
     pre-warm: a boosted round pays no cold starts);
  4. a metrics row (returns, times, cold starts, cost) is appended and the record saved.
Bulk data goes through Redis only; what passes through the invoker is small JSON. The driver
itself does no tensor work, so the gateway needs no torch.

Faults: an actor slot that fails is invoked again (``ACTOR_ATTEMPTS`` in all), so a round never
trains on part of its batch; only a slot that keeps failing ends the job. While Redis is
unreachable the job pauses (up to ``outage_max_s``): its own Redis writes and the invocations
that failed for want of Redis are retried once it is back, each of them idempotent (a retried
actor's second blob replaces its first, a retried learner returns the update it already
published, a round's row is appended once).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from redis.asyncio import Redis

from faasrl.contracts import EvaluateResult, InitResult, RolloutResult, UpdateResult
from faasrl.controllers import Controller, RoundContext, build_controller
from faasrl.controllers.nitro import convexity_ratio
from faasrl.data import acl
from faasrl.data.connection import UNREACHABLE, UNREACHABLE_NAMES
from faasrl.data.health import RedisHealth
from faasrl.data.keys import latest_key, optimizer_keys, params_key, update_key
from faasrl.invoker import InvocationRecord, Invoker, InvokerError
from faasrl.jobs.checkpoint import read_checkpoint, write_checkpoint
from faasrl.jobs.cost import actor_cost, learner_cost, serverful_cost
from faasrl.jobs.function_calls import (
    evaluate_args,
    init_args,
    result,
    rollout_args,
    update_args,
)
from faasrl.jobs.store import Evaluation, JobRecord, JobStore

log = logging.getLogger(__name__)
CONFIRM_GAP = 5  # rounds between evaluations that try to confirm a reached target
ACTOR_ATTEMPTS = 3  # invocations of one actor slot in a round before the job fails
REDIS_ATTEMPTS = 5  # invocations of a function that keeps finding Redis unreachable
T = TypeVar("T")


class JobError(RuntimeError):
    """A round could not complete; the message says which function failed and why."""


class RedisDown(RuntimeError):
    """A function could not reach Redis: the round waits for it (async: starts over)."""


def _unreachable(rec: InvocationRecord) -> bool:
    """Whether an invocation failed because Redis did not answer (its retries ran out)."""
    return rec.status != "success" and (rec.error or {}).get("type") in UNREACHABLE_NAMES


def _measurements(out: UpdateResult) -> dict[str, Any]:
    """The learner's measurements for controllers, flattened into metrics-row columns."""
    row: dict[str, Any] = {}
    if (h := out.hessian) is not None:
        row.update(hessian_lambda_min=h.lambda_min, hessian_lambda_max=h.lambda_max,
                   hessian_ratio=convexity_ratio(h.lambda_min, h.lambda_max),
                   hessian_s=h.seconds, hessian_samples=h.samples,
                   hessian_iterations=h.iterations)
    if (g := out.gns) is not None:
        row.update(gns=g.gns, gns_grad_sq=g.grad_sq, gns_trace=g.trace)
    return row


def _describe(rec: InvocationRecord) -> str:
    err = rec.error or {}
    return f"{rec.function} ({rec.status}): {err.get('type', '?')}: {err.get('message', '')}"


class JobDriver:
    restored_fields: tuple[str, ...] = (
        "round", "version", "env_steps", "wall_s", "cost_usd", "serverful_cost_usd",
        "recent_returns", "algorithm_state", "controller_state", "last_row", "policy")

    def __init__(self, record: JobRecord, *, store: JobStore, invoker: Invoker, redis: Redis,
                 checkpoints: Path, schedulers: Path | None = None,
                 health: RedisHealth | None = None, outage_max_s: float = 600.0):
        self.record = record
        self.health = health
        self.outage_max_s = outage_max_s
        self.credentials = acl.JobCredentials.new(record.id)  # its functions' Redis user
        self.paused_s = 0.0  # time spent waiting for Redis (reset per row)
        self.schedulers = schedulers
        self.store = store
        self.invoker = invoker
        self.redis = redis
        self.folder = checkpoints / record.id
        self.stop_requested: str | None = None  # the status to end with: see stop_if_requested
        self._history: list[dict[str, Any]] = []
        self._next_confirm = 0  # first round at which a reached target may be evaluated
        # (round, actors, the controller's explanation, seconds it took) of the round's decision
        self._planned: tuple[int, int, dict[str, Any], float] | None = None

    # ------------------------------------------------------------------- the job
    async def run(self) -> None:
        rec, spec = self.record, self.record.spec
        rec.status, rec.error, rec.stop_reason = "running", None, None
        rec.started_at = rec.started_at or time.time()
        self._clock, self._wall_before = time.monotonic(), rec.wall_s
        try:
            await self._with_redis(lambda: self.store.save(rec))
            await self._with_redis(self.grant)
            controller = build_controller(spec.controller, schedulers=self.schedulers)
            controller.load_state_dict(rec.controller_state)
            self._history = await self._with_redis(lambda: self.store.rows(rec.id))
            # The actors start while the learner builds the initial policy, not after it.
            self.invoker.prewarm(spec.actor_function, self._actors_for_round(controller),
                                 placement=spec.placement.actors)
            if rec.version is None:
                await self._initialize()
            else:
                await self._with_redis(self._restore)
            while (reason := await self._stop_reason(controller)) is None:
                self._stop_if_requested()
                await self._with_redis(self.grant)  # a restarted Redis forgot the user
                try:
                    await self._round(controller)
                except (RedisDown, *UNREACHABLE) as exc:
                    await self._round_interrupted(exc)
            rec.stop_reason = reason
            if spec.evaluation_episodes and (rec.evaluation is None
                                             or rec.evaluation.version != rec.version):
                rec.evaluation = await self._evaluate()
            rec.status = "succeeded"
        except asyncio.CancelledError:
            rec.status = self.stop_requested or "cancelled"
            raise
        except Exception as exc:
            log.warning("job %s failed: %s", rec.id, exc)
            rec.status, rec.error = "failed", str(exc)
        finally:
            rec.wall_s = self._wall()
            if rec.status != "interrupted":
                rec.finished_at = time.time()
            await self._save_final()

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
        """(Re)create the job's Redis user for its functions (idempotent)."""
        await acl.grant(self.redis, self.record.id, self.credentials)

    async def _with_redis(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run one of the driver's own (idempotent) Redis operations; while Redis is
        unreachable the job pauses, and the operation runs again when it is back."""
        while True:
            try:
                return await op()
            except UNREACHABLE as exc:
                await self._pause(f"Redis is unreachable ({exc})")

    async def _pause(self, why: str) -> None:
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

    async def _round_interrupted(self, exc: Exception) -> None:
        """A round met an unreachable Redis where it cannot simply retry: wait for Redis; the
        round then runs again."""
        await self._pause(str(exc))

    def _stop_if_requested(self) -> None:
        """The manager cancels the driver's task and also sets ``stop_requested``, checked here
        between rounds: a cancellation can be lost, since Python 3.11's ``asyncio.wait_for``
        (which redis-py awaits on each command it sends) drops one that arrives as its inner
        await finishes, and the job would then run on."""
        if self.stop_requested is not None:
            raise asyncio.CancelledError

    async def _stop_reason(self, controller: Controller) -> str | None:
        rec, stop = self.record, self.record.spec.stop
        if (reached := await self._target_reached()) is not None:
            return reached
        if stop.max_rounds is not None and rec.round >= stop.max_rounds:
            return f"max_rounds ({stop.max_rounds}) done"
        if stop.max_env_steps is not None and rec.env_steps >= stop.max_env_steps:
            return f"max_env_steps ({stop.max_env_steps}) reached"
        if stop.budget_usd is not None and rec.cost_usd >= stop.budget_usd:
            return f"budget (${stop.budget_usd:g}) spent"
        if stop.max_wall_s is not None and self._wall() >= stop.max_wall_s:
            return f"max_wall_s ({stop.max_wall_s:g}) reached"
        if self._actors_for_round(controller) == 0:
            return "the controller ended the job: the budget left cannot pay for another round"
        return None

    async def _target_reached(self) -> str | None:
        """Whether the policy reached ``target_reward``.

        Training returns come from several recent versions of a sampling policy, so a window
        that reaches the target is confirmed by evaluating the current version (when the job
        evaluates at all); a failed confirmation is retried only ``CONFIRM_GAP`` rounds later.
        """
        rec, spec = self.record, self.record.spec
        target, mean = spec.stop.target_reward, rec.recent_mean_return
        if (target is None or mean is None or len(rec.recent_returns) < spec.stop.target_window
                or mean < target):
            return None
        reached = f"target reward reached: training mean {mean:.1f} over " \
                  f"{spec.stop.target_window} episodes"
        if not spec.stop.confirm_target or not spec.evaluation_episodes:
            return reached
        if rec.round < self._next_confirm:
            return None
        rec.evaluation = await self._evaluate()
        await self._with_redis(lambda: self.store.save(rec))
        if rec.evaluation.mean >= target:
            return f"{reached}, evaluation mean {rec.evaluation.mean:.1f} over " \
                   f"{rec.evaluation.episodes}"
        self._next_confirm = rec.round + CONFIRM_GAP
        return None

    # ------------------------------------------------------------------ a round
    async def _round(self, controller: Controller) -> None:
        rec, spec = self.record, self.record.spec
        k, version = rec.round, rec.version
        n = self._actors_for_round(controller)
        _, _, decision, decision_s = self._planned or (k, n, {}, 0.0)
        self.invoker.prewarm(spec.actor_function, n, placement=spec.placement.actors)
        self.invoker.prewarm(spec.learner_function, 1)

        t0 = time.monotonic()
        slots = await asyncio.gather(*(self._actor_slot(k, slot, version) for slot in range(n)))
        t1 = time.monotonic()
        ok = [(slot, attempts[-1]) for slot, attempts in enumerate(slots)]
        actors = [r for attempts in slots for r in attempts]  # every attempt is billed
        failed = [r for r in actors if r.status != "success"]

        summaries = [result(RolloutResult, r) for _, r in ok]
        returns = [float(ret) for s in summaries for ret, _ in s.episodes]
        run_times = [r.run_s for _, r in ok]
        cost_actors = actor_cost(actors, spec.pricing)
        # Predictive pre-warm: containers for the next round start while the learner runs. The
        # forecast sees what the actors already told (a row without the learner's columns).
        partial = {"round": k, "actors": n, "mean_return": statistics.fmean(returns)
                   if returns else None, "actor_s_mean": statistics.fmean(run_times),
                   "actor_s_max": max(run_times), "cost_actors": cost_actors}
        forecast = max(0, controller.forecast(self._context(k + 1, partial)))
        self.invoker.prewarm(spec.actor_function, forecast, placement=spec.placement.actors)
        args = update_args(rec, self.credentials.to_args(), k, [slot for slot, _ in ok],
                           controller.learner_requests())
        learners = await self._invoke_until_done(spec.learner_function,
                                                 args.model_dump(mode="json"),
                                                 affinity=f"{rec.id}:learner")
        learner = learners[-1]
        if learner.status != "success":
            raise JobError(f"round {k}: {_describe(learner)}")
        out = result(UpdateResult, learner)
        t2 = time.monotonic()

        steps = sum(s.steps for s in summaries)
        cost_learner = learner_cost(learners, spec.pricing)
        rec.round, rec.version = k + 1, out.version
        rec.env_steps += steps
        rec.algorithm_state = out.algorithm_state
        rec.recent_returns = (rec.recent_returns + returns)[-spec.stop.target_window:]
        rec.cost_usd += cost_actors + cost_learner
        rec.wall_s = self._wall()
        rec.serverful_cost_usd = serverful_cost(rec.wall_s, spec.pricing)
        rec.controller_state = controller.state_dict()
        row = {
            "round": k, "actors": n, "actor_failures": len(failed),
            "version": rec.version, "env_steps": steps, "total_env_steps": rec.env_steps,
            "episodes": len(returns),
            "mean_return": statistics.fmean(returns) if returns else None,
            "max_return": max(returns) if returns else None,
            "recent_mean_return": rec.recent_mean_return,
            "round_s": t2 - t0, "actor_phase_s": t1 - t0, "learner_phase_s": t2 - t1,
            "actor_s_max": max(run_times), "actor_s_mean": statistics.fmean(run_times),
            "learner_s": learner.run_s,
            "cold_starts": sum(r.cold for r in [*actors, *learners]),
            "actor_cold_starts": sum(r.cold for r in actors), "prewarm_forecast": forecast,
            "queue_s_max": max(r.queue_s for r in [*actors, *learners]),
            "paused_s": self.paused_s,
            **{key: out.stats.get(key) for key in ("loss", "pg_loss", "v_loss", "entropy",
                                                   "approx_kl", "clipfrac",
                                                   "explained_variance", "lr")},
            "learner_device": out.device, "samples": out.samples, "policy_kl": out.policy_kl,
            **_measurements(out), "controller": decision, "controller_s": decision_s,
            "rejected": len(out.rejected),
            "transfer_s": out.read_s + max(s.write_s for s in summaries),
            "cost_actors": cost_actors, "cost_learner": cost_learner,
            "cost_round": cost_actors + cost_learner, "cost_total": rec.cost_usd,
            "serverful_cost_total": rec.serverful_cost_usd, "wall_s": rec.wall_s,
        }
        if failed:
            row["actor_error"] = _describe(failed[0])
        if out.rejected:
            row["rejected_reasons"] = [r.reason for r in out.rejected][:5]
        await self._append_row(row)

    async def _append_row(self, row: dict[str, Any]) -> None:
        """Record a finished round: its row and the record, once, whatever Redis does."""
        rec = self.record
        rec.last_row = row
        self._history.append(row)
        self.paused_s = 0.0
        index = len(self._history) - 1
        await self._with_redis(lambda: self.store.save_round(rec, row, index))
        if rec.round % rec.spec.checkpoint_every == 0:
            await self._with_redis(self._checkpoint)

    async def _actor_slot(self, k: int, slot: int, version: int | None
                          ) -> list[InvocationRecord]:
        """One actor slot's rollout of round ``k``: every attempt, the last one successful.
        A slot that fails is invoked again; one that fails ``ACTOR_ATTEMPTS`` times ends the
        job, since training on a partial batch would change what a round means."""
        rec, spec = self.record, self.record.spec
        args = rollout_args(rec, self.credentials.to_args(), k, slot, version)
        attempts = await self._invoke_until_done(spec.actor_function,
                                                 args.model_dump(mode="json"),
                                                 affinity=f"{rec.id}:actor:{slot}",
                                                 retries=ACTOR_ATTEMPTS - 1)
        if attempts[-1].status != "success":
            raise JobError(f"round {k}: actor slot {slot} failed {len(attempts)} times; "
                           f"{_describe(attempts[-1])}")
        return attempts

    async def _invoke_until_done(self, function: str, args: dict[str, Any], *,
                                 affinity: str | None = None, retries: int = 0
                                 ) -> list[InvocationRecord]:
        """Invoke until it succeeds: ``retries`` more times after any failure, and after one
        for want of Redis (up to ``REDIS_ATTEMPTS`` in all) once Redis answers again. Returns
        every attempt's record (the caller bills them all and reads the last)."""
        records: list[InvocationRecord] = []
        while True:
            r = await self._invoke(function, args, affinity=affinity)
            records.append(r)
            if r.status == "success":
                return records
            redis_down = _unreachable(r)
            failures = sum(not _unreachable(x) for x in records)
            if failures > retries or len(records) >= max(REDIS_ATTEMPTS, retries + 1):
                return records
            log.warning("job %s: %s; invoking it again", self.record.id, _describe(r))
            if redis_down:
                await self._pause(f"{function} could not reach Redis")

    def _actors_for_round(self, controller: Controller) -> int:
        """I_k for the current round, asked of the controller once per round (0: stop)."""
        rec = self.record
        if self._planned is None or self._planned[0] != rec.round:
            t0 = time.perf_counter()
            n = max(0, controller.actors(self._context(rec.round)))
            self._planned = (rec.round, n, controller.explain(), time.perf_counter() - t0)
        return self._planned[1]

    def _context(self, round_: int, partial: dict[str, Any] | None = None) -> RoundContext:
        """What the controller sees before ``round_``; for a forecast, ``partial`` is the
        running round's row so far (its actors' results)."""
        rec, stop = self.record, self.record.spec.stop
        spent = rec.cost_usd + (partial or {}).get("cost_actors", 0.0)
        left = None if stop.budget_usd is None else stop.budget_usd - spent
        history = self._history if partial is None else [*self._history, partial]
        return RoundContext(round_, history, left, stop.budget_usd, stop.target_reward,
                            rec.spec.seed)

    # -------------------------------------------------------------------- steps
    async def _initialize(self) -> None:
        """The learner builds the seeded initial policy and publishes it as version 0."""
        rec = self.record
        args = init_args(rec, self.credentials.to_args())
        out = (await self._invoke_until_done(rec.spec.learner_function,
                                             args.model_dump(mode="json")))[-1]
        if out.status != "success":
            raise JobError(f"initializing the policy: {_describe(out)}")
        init = result(InitResult, out)
        rec.policy, rec.version = init.policy, init.version
        rec.algorithm_state = init.algorithm_state
        await self._with_redis(lambda: self.store.save(rec))

    async def _restore_from_disk(self) -> None:
        """Redis lost the job's weights: put the disk checkpoint's record fields, weights and
        optimizer back (the fields a resume needs are the class's ``restored_fields``)."""
        rec = self.record
        saved = await asyncio.to_thread(read_checkpoint, self.folder)
        if saved is None:
            raise JobError(f"job {rec.id}: no weights in Redis and no checkpoint in "
                           f"{self.folder}")
        record_json, weights, optimizer = saved
        disk = JobRecord.model_validate_json(record_json)
        for field in self.restored_fields:
            setattr(rec, field, getattr(disk, field))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(params_key(rec.id, rec.version), weights)
            pipe.set(latest_key(rec.id), rec.version)
            if optimizer is not None:
                state_key, version_key = optimizer_keys(rec.id)
                pipe.set(state_key, optimizer)
                pipe.set(version_key, rec.version)
            await pipe.execute()
        self._wall_before = rec.wall_s

    async def _restore(self) -> None:
        """Continue from the last state: Redis first, the disk checkpoint when Redis lost it."""
        rec = self.record
        latest = await self.redis.get(latest_key(rec.id))
        if latest is None:
            await self._restore_from_disk()
        elif int(latest) > (rec.version or 0):
            await self._roll_back(int(latest))

    async def _roll_back(self, latest: int) -> None:
        """The learner published a version whose round the driver never recorded (the gateway
        stopped in between): go back to the recorded version, so that the round runs again
        and gets its row (its batches were consumed; new rollouts replace them)."""
        rec = self.record
        version = rec.version or 0
        log.warning("job %s: rolling back from version %d, published after the last recorded "
                    "round, to %d", rec.id, latest, version)
        state_key, version_key = optimizer_keys(rec.id)
        previous_state, previous_version = optimizer_keys(rec.id, previous=True)
        kept = await self.redis.get(previous_version)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(latest_key(rec.id), version)
            pipe.delete(*(params_key(rec.id, v) for v in range(version + 1, latest + 1)),
                        update_key(rec.id))
            if kept is not None and int(kept) == version:
                pipe.copy(previous_state, state_key, replace=True)
                pipe.set(version_key, version)
            await pipe.execute()

    async def _evaluate(self) -> Evaluation:
        rec = self.record
        args = evaluate_args(rec, self.credentials.to_args())
        out = (await self._invoke_until_done(rec.spec.actor_function,
                                             args.model_dump(mode="json")))[-1]
        if out.status != "success":
            raise JobError(f"evaluation: {_describe(out)}")
        returns = result(EvaluateResult, out).returns
        return Evaluation(version=rec.version or 0, episodes=len(returns),
                          mean=statistics.fmean(returns),
                          std=statistics.pstdev(returns) if len(returns) > 1 else 0.0,
                          min=min(returns), max=max(returns), returns=returns)

    async def _checkpoint(self) -> None:
        rec = self.record
        weights = await self.redis.get(params_key(rec.id, rec.version))
        if weights is None:
            return
        optimizer = await self.redis.get(optimizer_keys(rec.id)[0])
        await asyncio.to_thread(write_checkpoint, self.folder, rec.model_dump_json(), weights,
                                optimizer)

    async def _invoke(self, function: str, args: dict[str, Any], affinity: str | None = None
                      ) -> InvocationRecord:
        spec = self.record.spec
        # Actors go where the job places them; learners always run locally.
        placement = spec.placement.actors if function == spec.actor_function else "local"
        try:
            return await self.invoker.invoke(function, args, affinity=affinity,
                                             placement=placement)
        except InvokerError as exc:
            raise JobError(f"{function}: {exc.kind}: {exc.message}") from exc

    def _wall(self) -> float:
        return self._wall_before + (time.monotonic() - self._clock)
