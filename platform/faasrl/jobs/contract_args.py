"""The driver's side of the function contracts (:mod:`faasrl.contracts`): a job's invocation
args built from its record, and the results read back.

One small function per invocation, so that whatever drives a job (the round drivers, a
workflow) sends the same args.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter

from faasrl.contracts import (
    EvaluateArgs,
    ExploreArgs,
    FlushArgs,
    GradientArgs,
    IngestArgs,
    InitArgs,
    JobContext,
    RolloutArgs,
    SampleArgs,
    StepArgs,
    TrainArgs,
    UpdateArgs,
    parse,
)
from faasrl.data.ops import ASYNC_KEEP_VERSIONS
from faasrl.invoker import InvocationRecord
from faasrl.jobs.store import JobRecord
from faasrl.rl.seeds import Purpose, evaluation_seeds

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def result(contract: type[M] | TypeAdapter[T], rec: InvocationRecord) -> M | T:
    """A successful invocation's result, as its contract (a model, or a union's adapter) reads
    it."""
    return parse(contract, rec.result, f"{rec.function} result")


def job_context(rec: JobRecord, redis: dict[str, str]) -> JobContext:
    """What every invocation of the job carries; ``redis``: its functions' credentials."""
    spec = rec.spec
    return JobContext(id=rec.id, env_id=spec.env_id, env=spec.env, env_backend=spec.backend,
                      env_description=rec.env_description, policy=rec.policy, seed=spec.seed,
                      envs_per_actor=spec.envs_per_actor, steps_per_actor=spec.steps_per_actor,
                      compress=spec.compress, redis=redis, hyperparameters=spec.hyperparameters)


def init_args(rec: JobRecord, redis: dict[str, str]) -> InitArgs:
    return InitArgs(job=job_context(rec, redis))


def rollout_args(rec: JobRecord, redis: dict[str, str], round: int, slot: int,
                 version: int | None) -> RolloutArgs:
    return RolloutArgs(job=job_context(rec, redis), round=round, slot=slot, version=version)


def evaluate_args(rec: JobRecord, redis: dict[str, str], purpose: Purpose) -> EvaluateArgs:
    """Evaluate the current version on ``purpose``'s seeds, which neither training nor the
    other purpose ever plays."""
    seeds = evaluation_seeds(rec.spec.seed, purpose, rec.spec.evaluation_episodes)
    return EvaluateArgs(job=job_context(rec, redis), version=rec.version, episodes=len(seeds),
                        seed=seeds.start)


def update_args(rec: JobRecord, redis: dict[str, str], round: int, slots: list[int],
                requests: dict[str, Any]) -> UpdateArgs:
    """A synchronous round's update of the current version; ``requests``: the controller's
    (``hessian``, ``gns``)."""
    return UpdateArgs(job=job_context(rec, redis), round=round, version=rec.version,
                      slots=slots, algorithm_state=rec.algorithm_state,
                      total_rounds=rec.spec.stop.max_rounds, **requests)


def gradient_args(rec: JobRecord, redis: dict[str, str], slot: int, entries: list[str],
                  envs: list[tuple[int, int]] | None = None) -> GradientArgs:
    """A learner's gradient on a slice: ``envs``, per entry, its env columns (None: all)."""
    return GradientArgs(job=job_context(rec, redis), slot=slot, entries=entries, envs=envs)


def parameter_args(rec: JobRecord, redis: dict[str, str], mode: Literal["step", "flush"],
                   round: int, session: str) -> StepArgs:
    spec = rec.spec
    cfg = spec.asynchronous
    aggregation = cfg.aggregation
    if aggregation.rule == "softsync" and aggregation.k is None:
        aggregation = aggregation.model_copy(update={"k": cfg.max_learners})
    # A target network trails the policy by target_update_frequency versions (IMPACT).
    keep = ASYNC_KEEP_VERSIONS + getattr(spec.hyperparameters, "target_update_frequency", 1)
    return (FlushArgs if mode == "flush" else StepArgs)(
        job=job_context(rec, redis), round=round, session=session,
        total_rounds=spec.stop.max_rounds, aggregation=aggregation,
        optimizer_step=cfg.optimizer_step, learners=cfg.max_learners, keep=keep)


# ------------------------------------------------------------------------- off-policy
def explore_args(rec: JobRecord, redis: dict[str, str], slot: int, actors: int,
                 version: int | None = None) -> ExploreArgs:
    """``version``: the policy to explore with; None: the newest published."""
    return ExploreArgs(job=job_context(rec, redis), slot=slot, actors=actors, version=version)


def ingest_args(rec: JobRecord, redis: dict[str, str], entries: list[str], inserted: int
                ) -> IngestArgs:
    return IngestArgs(job=job_context(rec, redis), entries=entries, inserted=inserted)


def sample_args(rec: JobRecord, redis: dict[str, str], batches: int, beta: float,
                priorities: str | None, inserted: int) -> SampleArgs:
    return SampleArgs(job=job_context(rec, redis), batches=batches, beta=beta,
                      priorities=priorities, inserted=inserted)


def train_args(rec: JobRecord, redis: dict[str, str], version: int, sample: str,
               save_optimizer: bool, keep: int | None = None) -> TrainArgs:
    """``keep``: the versions to keep readable once it publishes; None: the store's default."""
    return TrainArgs(job=job_context(rec, redis), version=version, sample=sample,
                     algorithm_state=rec.algorithm_state, save_optimizer=save_optimizer,
                     keep=keep)
