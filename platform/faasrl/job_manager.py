"""Submits, cancels, resumes and deletes jobs; owns their runs (asyncio tasks) in the gateway."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from pathlib import Path

from redis.asyncio import Redis

from faasrl.algorithms import ALGORITHMS
from faasrl.algorithms.offpolicy import (
    replay_memory_mb,
    stored_transition_bytes,
    transition_layout,
)
from faasrl.controllers.minions import OUTPUT_BIAS
from faasrl.controllers.saved_schedulers import SchedulerNotFound, load_scheduler
from faasrl.data import acl
from faasrl.data.health import OUTAGE_MAX_S, RedisHealth
from faasrl.env_code import EnvDescription
from faasrl.invoker import Invoker
from faasrl.invoker.errors import FunctionNotFound
from faasrl.jobs import videos
from faasrl.jobs.admission import Admission
from faasrl.jobs.env_probe import EnvProbe
from faasrl.jobs.errors import InvalidJobField
from faasrl.jobs.executions import WORKFLOWS
from faasrl.jobs.spec import FUNCTION_FIELDS, JobSpec
from faasrl.jobs.store import ACTIVE, JobRecord, JobStore
from faasrl.manifest import NotOnLambda
from faasrl.namespaces import DEFAULT, SEPARATOR, local_name, qualify
from faasrl.rl.model_spec import NetworkError, trunk
from faasrl.workflow.job import JobRun, Publish


class JobNotFound(LookupError):
    pass


class JobConflict(RuntimeError):
    """The job is not in a state that allows this (e.g. resuming a running job)."""


class JobManager:
    def __init__(self, store: JobStore, invoker: Invoker, redis: Redis, checkpoints: Path,
                 probe: EnvProbe, schedulers: Path | None = None, *,
                 health: RedisHealth | None = None, outage_max_s: float = OUTAGE_MAX_S):
        self.store = store
        self._probe = probe
        self._invoker = invoker
        self._redis = redis
        self._checkpoints = checkpoints
        self._schedulers = schedulers
        self._health = health
        self._outage_max_s = outage_max_s
        self._running: dict[str, tuple[JobRun, asyncio.Task[None]]] = {}
        self.publish: Publish | None = None  # the serve rule's, set by the gateway
        self.admission = Admission(invoker.quota, redis)  # the namespaces' jobs and spend
        if health is not None:
            health.on_recovery(self._grant_all)

    async def _grant_all(self) -> None:
        """Redis came back, maybe restarted without the jobs' ACL users: grant them again, so
        that functions riding out the outage can log in."""
        for job_run, _ in list(self._running.values()):
            await job_run.grant()

    async def start(self) -> None:
        """Resume the jobs a stopped (or crashed) gateway was running."""
        for rec in await self.store.list():
            if rec.status in (*ACTIVE, "interrupted"):
                self._launch(rec)

    async def close(self) -> None:
        """Stop every run; their jobs are marked interrupted and resume at the next start."""
        tasks = [self._stop(job_id, "interrupted") for job_id in list(self._running)]
        await asyncio.gather(*tasks, return_exceptions=True)

    def resolve(self, namespace: str, name: str) -> str:
        """The function a job of ``namespace`` runs by ``name``: the namespace's own of that
        name, else ``default``'s (the built-in functions)."""
        own = qualify(namespace, name)
        try:
            return self._invoker.spec(own).name
        except FunctionNotFound:
            return name

    async def submit(self, spec: JobSpec, namespace: str = DEFAULT) -> JobRecord:
        """Start a job of ``namespace``; its functions resolve in it (``resolve``)."""
        given = spec
        for field in FUNCTION_FIELDS:  # a '.': another namespace's, which is no function here
            if SEPARATOR in (name := getattr(spec, field)):
                raise InvalidJobField(field, f"no function named {name!r} is registered")
        spec = spec.model_copy(update={field: self.resolve(namespace, getattr(spec, field))
                                       for field in FUNCTION_FIELDS})
        needed = [("actor_function", spec.actor_function),
                  ("learner_function", spec.learner_function)]
        if spec.execution == "async":
            needed.append(("parameter_function", spec.parameter_function))
        if spec.execution == "offpolicy":
            needed.append(("buffer_function", spec.buffer_function))
        for field, name in needed:
            try:
                self._invoker.spec(name)
            except FunctionNotFound:
                raise InvalidJobField(field, f"no function named {getattr(given, field)!r} "
                                      "is registered") from None
        actor = self._invoker.spec(spec.actor_function)
        on_lambda = self._on_lambda(spec)
        if on_lambda:
            try:
                actor.lambda_target()
            except NotOnLambda as exc:
                raise InvalidJobField("placement.actors", str(exc)) from None
        self._check_fits(needed[1:] if on_lambda else needed)
        self._check_controller(spec)
        described = await self._probe.describe(spec, on_lambda, namespace)
        if spec.execution == "offpolicy":
            self._check_replay(spec, described)
        self._check_network(spec, described)
        rec = JobRecord(id=uuid.uuid4().hex[:12], spec=spec, namespace=namespace,
                        created_at=time.time(), env_description=described)
        await self.store.save(rec)
        self._launch(rec)
        return rec

    def _on_lambda(self, spec: JobSpec) -> bool:
        """Whether the job's actors run on AWS Lambda."""
        actor = self._invoker.spec(spec.actor_function)
        return (spec.placement.actors or actor.placement) == "lambda"

    def _check_fits(self, needed: list[tuple[str, str]]) -> None:
        """Each function the job runs here fits the node (a cluster's nodes may have left since
        it was deployed): else the job could never run a round."""
        for field, name in needed:
            if short := self._invoker.shortfall(self._invoker.spec(name)):
                raise InvalidJobField(field, f"{local_name(name)!r} cannot run here now: "
                                      + "; ".join(f"{key}: {why}" for key, why in short.items()))

    def _check_controller(self, spec: JobSpec) -> None:
        ctl = spec.controller
        if ctl.name == "minions":
            if self._schedulers is None:
                raise InvalidJobField("controller.scheduler",
                                      "this gateway has no schedulers folder")
            try:
                weights, _ = load_scheduler(self._schedulers, ctl.scheduler)
            except SchedulerNotFound as exc:
                raise InvalidJobField("controller.scheduler", str(exc)) from None
            if OUTPUT_BIAS not in weights:
                raise InvalidJobField("controller.scheduler",
                                      f"{ctl.scheduler!r} is not a MinionsRL scheduler")
        if ctl.name == "minions-adapt" and not (spec.stop.target_reward or 0) > 0:
            raise InvalidJobField("stop.target_reward", "minions-adapt scales actors by the "
                                  "share of the target reached: set a positive target_reward")

    def _check_network(self, spec: JobSpec, env: EnvDescription) -> None:
        """The observations take the network the job's ``model`` section asks for (an MLP
        takes any: only a named CNN, or separate trunks that an image's CNN forbids, needs a
        look at the env's description), and a set initial log-std has continuous actions."""
        model = spec.hyperparameters.model
        if getattr(model, "log_std_init", None) is not None and env.action_kind == "discrete":
            raise InvalidJobField("hyperparameters.model.log_std_init", f"{spec.env_id}'s "
                                  "actions are discrete: its policy has no standard deviation")
        if model.cnn in ("auto", "none") and getattr(model, "shared_trunk", None) is not False:
            return
        try:
            cnn = trunk(model, tuple(env.obs_shape), env.obs_dtype)
        except NetworkError as exc:
            raise InvalidJobField(f"hyperparameters.model.{exc.field}", exc.message) from None
        if cnn == "impala" and spec.controller.name == "nitro":
            raise InvalidJobField("hyperparameters.model.cnn", "nitro's surrogate Hessian has "
                                  "no R-operator for the IMPALA CNN's pools and residual "
                                  "blocks: take nature, or another controller")

    def _check_replay(self, spec: JobSpec, env: EnvDescription) -> None:
        """The env's actions are the algorithm's kind, and the replay memory fits the buffer
        function's memory."""
        kinds, kind = ALGORITHMS[spec.algorithm].ACTION_KINDS, env.action_kind
        actions = ((), "int64") if kind == "discrete" else ((env.action_dim,), "float32")
        layout = transition_layout(tuple(env.obs_shape), env.obs_dtype, *actions)
        if kind not in kinds:
            raise InvalidJobField("algorithm", f"{spec.algorithm} needs {' or '.join(kinds)} "
                                  f"actions; {spec.env_id} has {kind} ones")
        hp, function = spec.hyperparameters, self._invoker.spec(spec.buffer_function)
        stored = stored_transition_bytes(layout)
        need = replay_memory_mb(hp.memory_size, stored)
        if need > function.memory_mb:
            raise InvalidJobField(
                "hyperparameters.memory_size",
                f"{hp.memory_size:,} transitions of up to {stored:,} bytes need "
                f"{need:,} MiB in the buffer function (snapshots copy the memory); "
                f"{local_name(function.name)!r} has memory_mb {function.memory_mb:,}")

    async def get(self, job_id: str) -> JobRecord:
        if job_id in self._running:  # the live record is newer than the saved one
            return self._running[job_id][0].record
        rec = await self.store.get(job_id)
        if rec is None:
            raise JobNotFound(f"no job {job_id!r}")
        return rec

    async def list(self) -> list[JobRecord]:
        """Every job, oldest first; running ones as their runs hold them."""
        return [self._running[rec.id][0].record if rec.id in self._running else rec
                for rec in await self.store.list()]

    def quota_changed(self) -> None:
        """A namespace's quota was set: jobs held by one look again."""
        self.admission.changed()

    def running(self) -> list[JobRecord]:
        """The records of the jobs this gateway runs now, as their runs hold them."""
        return [job_run.record for job_run, _ in self._running.values()]

    async def cancel(self, job_id: str) -> JobRecord:
        rec = await self.get(job_id)
        if job_id in self._running:
            await asyncio.gather(self._stop(job_id, "cancelled"), return_exceptions=True)
            return await self.get(job_id)
        if rec.status not in (*ACTIVE, "interrupted"):
            raise JobConflict(f"job {job_id} is {rec.status}; only an active job can be "
                              "cancelled")
        rec.status, rec.finished_at = "cancelled", time.time()
        await self.store.save(rec)
        return rec

    async def resume(self, job_id: str) -> JobRecord:
        rec = await self.get(job_id)
        if job_id in self._running or rec.status == "succeeded":
            raise JobConflict(f"job {job_id} is {rec.status}; only a cancelled, failed or "
                              "interrupted job can be resumed")
        await self._probe.install_requirements(rec.spec, self._on_lambda(rec.spec))
        rec.finished_at = None
        self._launch(rec)
        return rec

    def videos(self, job_id: str) -> Path:
        """The job's videos folder (inside its checkpoint folder: deleted with the job)."""
        return videos.folder(self._checkpoints, job_id)

    @property
    def checkpoints(self) -> Path:
        return self._checkpoints

    async def delete(self, job_id: str) -> None:
        await self.get(job_id)
        if job_id in self._running:
            await self.cancel(job_id)
        await self.store.delete(job_id)
        await acl.revoke(self._redis, job_id)
        await acl.revoke_serving(self._redis, job_id)
        await asyncio.to_thread(shutil.rmtree, self._checkpoints / job_id, True)

    def _stop(self, job_id: str, status: str) -> asyncio.Task[None]:
        """Stop a running job, ending its job with ``status``; returns its task."""
        job_run, task = self._running[job_id]
        if job_run.record.status in ACTIVE:  # else it is saving its end: let it finish
            job_run.stop_requested = status
            task.cancel()
        return task

    def _launch(self, rec: JobRecord) -> None:
        job_run = JobRun(rec, store=self.store, invoker=self._invoker, redis=self._redis,
                        checkpoints=self._checkpoints, workflow=WORKFLOWS[rec.spec.execution],
                        schedulers=self._schedulers, health=self._health,
                        outage_max_s=self._outage_max_s, admission=self.admission,
                        publish=self.publish)
        task = asyncio.create_task(job_run.run(), name=f"job-{rec.id}")
        self._running[rec.id] = (job_run, task)
        task.add_done_callback(lambda _: self._running.pop(rec.id, None))
