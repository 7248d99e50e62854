"""What the job driver sends the actor, learner and parameter functions, and what they answer.

One model per mode, a union on ``mode`` per function (``ActorArgs``, ``LearnerArgs``,
``ParameterArgs``, parsed with ``ACTOR_ARGS``, ...), and the job's context every invocation
carries (:class:`JobContext`). The driver builds these models and sends their JSON; a handler
parses its args with :func:`parse` at its boundary and answers with its result model, which
the driver reads back with :func:`parse` too. So keys are named once, on both sides, and a
malformed invocation fails with a :class:`ContractError` that names the field (``learner
args: job.envs_per_actor: Field required``). No torch here: the gateway imports this module.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from faasrl.algorithms import AlgorithmConfig
from faasrl.env_code import EnvCode, EnvDescription, EnvStage
from faasrl.rl.env_backends import EnvBackend
from faasrl.user_input import STRICT

# Machine to machine: no unknown keys, but JSON's lists read as tuples and ints as floats.
CONTRACT = ConfigDict(extra="forbid")
StreamId = Annotated[str, Field(pattern=r"^\d+-\d+$")]  # a Redis stream entry's id
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class ContractError(ValueError):
    """Args or a result that do not match their contract; the message names the field."""


def parse(contract: type[M] | TypeAdapter[T], data: Any, what: str) -> M | T:
    """``data`` validated against ``contract`` (a model or a union's adapter); ``what`` (e.g.
    "learner args") starts the error. A union's tag (the mode) is left out of the fields'
    paths."""
    try:
        if isinstance(contract, TypeAdapter):
            return contract.validate_python(data)
        return contract.model_validate(data)
    except ValidationError as exc:
        tag = data.get("mode") if isinstance(data, dict) else None
        problems = []
        for err in exc.errors():
            loc = err["loc"][1:] if err["loc"][:1] == (tag,) else err["loc"]
            problems.append(f"{'.'.join(map(str, loc)) or 'mode'}: {err['msg']}")
        raise ContractError(f"{what}: {'; '.join(problems)}") from None


# ------------------------------------------------------------------------------ the job
class Credentials(BaseModel):
    """The job's Redis user (``faasrl.data.acl``)."""

    model_config = CONTRACT
    username: str
    password: str


class JobContext(BaseModel):
    """What every function invocation of a job carries: the job spec's own names."""

    model_config = CONTRACT
    id: str
    env_id: str
    env: EnvCode | None = Field(None, description="the env as code (its archive at "
                                                  "faasrl.data.keys.env_code_key); None: "
                                                  "env_id is a registered gymnasium id")
    env_description: EnvDescription | None = Field(
        None, description="what the submit's describe probe found; None for jobs stored "
                          "before probes (their env is built to read its spaces)")
    policy: dict[str, Any] | None = Field(None, description="its PolicySpec; None before init")
    env_backend: EnvBackend = Field("gymnasium", description="the library that steps the "
                                    "training envs (the job spec's, resolved)")
    seed: int
    envs_per_actor: int = Field(ge=1)
    steps_per_actor: int = Field(ge=1)
    compress: bool = Field(False, description="lz4 on trajectory blobs")
    redis: Credentials | None = Field(None, description="None: the Redis URL's own user")
    hyperparameters: AlgorithmConfig

    def policy_spec(self) -> dict[str, Any]:
        """The policy's spec, which every mode but the learner's init needs."""
        if self.policy is None:
            raise ContractError("job.policy: none yet (the learner's init makes it)")
        return self.policy


class Rejection(BaseModel):
    """A trajectory blob a learner refused (``faasrl.data.trajectories.Rejection``)."""

    model_config = CONTRACT
    entry: str
    round: int
    slot: int
    reason: str


# ---------------------------------------------------------------------------- the actor
class RolloutArgs(BaseModel):
    model_config = CONTRACT
    mode: Literal["rollout"] = "rollout"
    job: JobContext
    round: int = Field(ge=0)
    slot: int = Field(ge=0)
    version: int | None = Field(description="the policy version; None: the newest")


class EvaluateArgs(BaseModel):
    model_config = CONTRACT
    mode: Literal["evaluate"] = "evaluate"
    job: JobContext
    version: int | None
    episodes: int = Field(ge=1)
    seed: int = Field(ge=0, description="episode i resets its env with seed + i: the first "
                                        "seed of a range faasrl.rl.seeds names")


class ExploreArgs(BaseModel):
    """Off-policy: explore with the newest policy (or the one named), push (transition,
    priority) to the stream."""

    model_config = CONTRACT
    mode: Literal["explore"] = "explore"
    job: JobContext
    slot: int = Field(ge=0, description="the actor's slot: Ape-X gives each its own ε")
    actors: int = Field(ge=1, description="actor slots in all")
    version: NonNegativeInt | None = Field(None, description="the policy version to explore "
                                                             "with; None: the newest published")


ENV_BACKEND = "the library that stepped the envs; None: an actor from before backends"
ENVS_STARTED = ("the slot's envs were started for this call: the container had none for it "
                "(the job counts it as an env restart when the slot had envs before)")


class RolloutResult(BaseModel):
    model_config = CONTRACT
    steps: int
    version: int
    entry: str = Field(description="the batch's trajectory stream entry")
    episodes: list[tuple[float, int]] = Field(description="finished: (raw return, length)")
    weights_fetched: bool
    fetch_s: float
    rollout_s: float
    write_s: float
    bytes: int
    envs_started: bool = Field(False, description=ENVS_STARTED)
    env_backend: EnvBackend | None = Field(None, description=ENV_BACKEND)


class EvaluateResult(BaseModel):
    model_config = CONTRACT
    returns: list[float]
    version: int


class ExploreResult(BaseModel):
    model_config = CONTRACT
    steps: int = Field(description="env steps taken")
    transitions: int = Field(description="n-step transitions completed and pushed")
    version: int
    entry: str | None = Field(description="the transitions' stream entry; None: none yet")
    episodes: list[tuple[float, int]]
    priority_mean: float | None = Field(description="of the pushed transitions, at the edge")
    weights_fetched: bool
    fetch_s: float
    rollout_s: float
    write_s: float
    bytes: int
    envs_started: bool = Field(False, description=ENVS_STARTED)
    env_backend: EnvBackend | None = Field(None, description=ENV_BACKEND)


class DescribeArgs(BaseModel):
    """Build an env as training would, run gymnasium's env checker on it and say what it is:
    the gateway's submit-time probe (it never imports users' code itself). No job yet, so no
    job Redis user: a code archive comes inline."""

    model_config = CONTRACT
    mode: Literal["describe"] = "describe"
    env_id: str
    env: EnvCode | None = None
    code: str | None = Field(None, description="the env's archive, base64")
    timeout_s: float = Field(30.0, gt=0, le=600,
                             description="the probe is stopped past it (an env that loops)")


class DescribeResult(BaseModel):
    """The env's description, or why there is none: an env that fails is an answer, not an
    error of the function."""

    model_config = CONTRACT
    description: EnvDescription | None = None
    error: str | None = Field(None, description="the exception's last lines, or 'timed out'")
    stage: EnvStage | None = Field(
        None, description="where it failed: the archive (code), importing the modules, "
                          "making the env, its spaces, reset, step or gymnasium's checker")


ActorArgs = Annotated[RolloutArgs | EvaluateArgs | ExploreArgs | DescribeArgs,
                      Field(discriminator="mode")]
ACTOR_ARGS: TypeAdapter[ActorArgs] = TypeAdapter(ActorArgs)


# -------------------------------------------------------------------------- the learner
class InitArgs(BaseModel):
    model_config = CONTRACT
    mode: Literal["init"] = "init"
    job: JobContext


class InitResult(BaseModel):
    model_config = CONTRACT
    policy: dict[str, Any]
    version: int
    parameters: int
    algorithm_state: dict[str, Any] = Field(description="the algorithm's initial_state")


class HessianRequest(BaseModel):
    model_config = CONTRACT
    samples: int = Field(ge=1)
    iterations: int = Field(ge=1)


class GNSRequest(BaseModel):
    model_config = CONTRACT
    parts: int = Field(ge=2)


class UpdateArgs(BaseModel):
    """A synchronous round's update: the batches of ``slots`` for ``round``, on ``version``."""

    model_config = CONTRACT
    mode: Literal["update"] = "update"
    job: JobContext
    round: int = Field(ge=0)
    version: int = Field(ge=0)
    slots: list[int]
    algorithm_state: dict[str, Any] = Field(description="what the last update returned")
    total_rounds: int | None = Field(description="the learning rate anneals over these")
    hessian: HessianRequest | None = None
    gns: GNSRequest | None = None


class HessianResult(BaseModel):
    model_config = CONTRACT
    lambda_min: float
    lambda_max: float
    iterations: int
    samples: int
    seconds: float


class GNSResult(BaseModel):
    model_config = CONTRACT
    gns: float | None
    grad_sq: float
    trace: float
    batch_small: int
    batch_big: int


class UpdateResult(BaseModel):
    model_config = CONTRACT
    version: int = Field(description="the version this update published")
    stats: dict[str, float] = Field(description="the algorithm's (losses, lr, ...)")
    algorithm_state: dict[str, Any]
    policy_kl: float
    hessian: HessianResult | None = None
    gns: GNSResult | None = None
    samples: int
    rejected: list[Rejection]
    read_s: float
    update_s: float
    publish_s: float | None = Field(None, description="None when replayed")
    device: str
    replayed: bool = Field(False, description="published before: the stored result")


class GradientArgs(BaseModel):
    """An asynchronous learner: one gradient on a slice of the round's batch, the env columns
    ``envs`` of the batches of ``entries`` (whole env trajectories, so V-trace's time axis
    stays whole)."""

    model_config = CONTRACT
    mode: Literal["gradient"] = "gradient"
    job: JobContext
    slot: int = Field(ge=0, description="the learner's slot (its registry key)")
    entries: list[str] = Field(description="trajectory stream entries")
    envs: list[tuple[int, int]] | None = Field(
        None, description="per entry, the slice's env columns [start, stop); None: all")
    version: int | None = Field(
        None, ge=0,
        description="the policy version to compute the gradient on; None: the newest published")
    peers: dict[NonNegativeInt, NonNegativeInt] | None = Field(
        None, description="the other learners' slots and the versions they compute on, for "
                          "the cross-learner ratios (their weights: those published "
                          "versions); None: the learners registered now")

    @field_validator("envs")
    @classmethod
    def _columns_fit(cls, envs: list[tuple[int, int]] | None, info: ValidationInfo
                     ) -> list[tuple[int, int]] | None:
        job, entries = info.data.get("job"), info.data.get("entries")
        if envs is None or job is None or entries is None:
            return envs
        if len(envs) != len(entries):
            raise ValueError("one [start, stop) per entry")
        if not all(0 <= a < b <= job.envs_per_actor for a, b in envs):
            raise ValueError(f"columns must be non-empty and within the batch's "
                             f"{job.envs_per_actor} envs")
        return envs


class GradientResult(BaseModel):
    model_config = CONTRACT
    clock: int = Field(description="the version the gradient was computed on")
    pushed: bool
    entry: str | None = Field(None, description="the gradient stream entry it pushed")
    samples: int
    rejected: list[Rejection]
    stats: dict[str, float] = Field(default_factory=dict, description="the algorithm's")
    policy_lag: float | None = None
    read_s: float | None = None
    compute_s: float | None = None
    push_s: float | None = None
    bytes: int | None = None
    device: str | None = None


class TrainArgs(BaseModel):
    """Off-policy: a gradient step on each sampled batch of blob ``sample``, then a publish."""

    model_config = CONTRACT
    mode: Literal["train"] = "train"
    job: JobContext
    version: int = Field(ge=0, description="the version trained on")
    sample: str = Field(description="the key of the buffer's sampled batches")
    algorithm_state: dict[str, Any]
    save_optimizer: bool = Field(description="store the optimizer state too (a round's last "
                                             "call: what a checkpoint or a replaced learner "
                                             "resumes with; other calls skip its bytes)")
    keep: PositiveInt | None = Field(None, description="policy versions kept in Redis once it "
                                                       "publishes; None: the store's default")


class TrainResult(BaseModel):
    model_config = CONTRACT
    version: int = Field(description="the version this invocation published")
    stats: dict[str, float]
    algorithm_state: dict[str, Any]
    priorities: str = Field(description="the key of (slots, generations, new |δ|)")
    steps: int = Field(description="gradient steps taken")
    samples: int
    bytes: int = Field(description="of the sampled batches read")
    read_s: float
    update_s: float
    publish_s: float
    device: str
    replayed: bool = Field(False, description="published before: the stored result")


LearnerArgs = Annotated[InitArgs | UpdateArgs | GradientArgs | TrainArgs,
                        Field(discriminator="mode")]
LEARNER_ARGS: TypeAdapter[LearnerArgs] = TypeAdapter(LearnerArgs)


# ------------------------------------------------------------------------ the parameter
class StellarisAggregation(BaseModel):
    """Stellaris: threshold β_k = δ_max·decay^k on the queue's mean staleness, step sizes
    α_0/δ^(1/root); δ_max from round 0 (no threshold) as its ``max`` (the paper) or
    ``int(mean) + 1`` (``mean``, the authors' code)."""

    model_config = STRICT
    rule: Literal["stellaris"] = "stellaris"
    decay: float = Field(0.96, gt=0, le=1, description="d; 1 = fully asynchronous")
    root: float = Field(3.0, gt=0, description="v in α_0/δ^(1/v)")
    delta_max: Literal["max", "mean"] = "max"


class AsyncAggregation(BaseModel):
    """Every gradient applied as it arrives (pure asynchronous, no staleness control)."""

    model_config = STRICT
    rule: Literal["async"] = "async"


class SoftSyncAggregation(BaseModel):
    """Aggregate every ``k`` gradients (default: the number of learners)."""

    model_config = STRICT
    rule: Literal["softsync"] = "softsync"
    k: int | None = Field(None, ge=1, le=1024)


class SSPAggregation(BaseModel):
    """Stale synchronous parallel: no gradient staler than ``s`` is applied."""

    model_config = STRICT
    rule: Literal["ssp"] = "ssp"
    s: int = Field(2, ge=0, le=1000)


# The job spec's ``asynchronous.aggregation`` is the parameter function's ``aggregation``.
AggregationSpec = Annotated[StellarisAggregation | AsyncAggregation | SoftSyncAggregation
                            | SSPAggregation, Field(discriminator="rule")]


class StepArgs(BaseModel):
    """Take the gradients new in the stream (or those named), aggregating as the rule says."""

    model_config = CONTRACT
    mode: Literal["step"] = "step"
    job: JobContext
    round: int = Field(ge=0)
    session: str = Field(description="the driver's run: a new one makes a warm server reload")
    total_rounds: int | None
    aggregation: AggregationSpec
    optimizer_step: Literal["weighted_mean", "per_gradient"]
    learners: int = Field(ge=1)
    keep: int = Field(ge=1, description="policy versions kept in Redis")
    gradients: list[StreamId] | None = Field(
        None, description="the gradient stream entries to take, in this order (those no "
                          "longer in the stream are skipped); None: every entry new in it")
    in_flight: list[NonNegativeInt] | None = Field(
        None, description="the clocks of the learners still computing (SSP waits for "
                          "them); None: the learners registered now")


class FlushArgs(StepArgs):
    """A step, then the round's end: aggregate what is queued, advance the rule."""

    mode: Literal["flush"] = "flush"  # type: ignore[assignment]


class StepResult(BaseModel):
    model_config = CONTRACT
    clock: int
    aggregations: int
    queued: int
    run_s: float


class FlushResult(StepResult):
    round_aggregations: int
    gradients_aggregated: int
    gradients_dropped: int
    reasons: dict[str, int]
    staleness_mean: float | None
    staleness_max: int | None
    threshold: float | None
    next_threshold: float | None
    state: dict[str, Any] = Field(description="the rule's state at the round end")


ParameterArgs = Annotated[StepArgs | FlushArgs, Field(discriminator="mode")]
PARAMETER_ARGS: TypeAdapter[ParameterArgs] = TypeAdapter(ParameterArgs)
PARAMETER_RESULT: TypeAdapter[FlushResult | StepResult] = TypeAdapter(FlushResult | StepResult)


# --------------------------------------------------------------------------- the buffer
class IngestArgs(BaseModel):
    """Move actors' transition entries from the stream into the replay memory."""

    model_config = CONTRACT
    mode: Literal["ingest"] = "ingest"
    job: JobContext
    entries: list[str]
    inserted: int = Field(ge=0, description="transitions the driver saw acknowledged: what a "
                                            "memory restored from an older snapshot lost")


class SampleArgs(BaseModel):
    """Apply the learner's last priorities, then draw ``batches`` batches for it."""

    model_config = CONTRACT
    mode: Literal["sample"] = "sample"
    job: JobContext
    batches: int = Field(ge=1)
    beta: float = Field(ge=0, le=1)
    priorities: str | None = Field(description="the key of the learner's new |δ|; None: none")
    inserted: int = Field(ge=0)


class BufferResult(BaseModel):
    """The memory after the call, and what a restore from its snapshot lost."""

    model_config = CONTRACT
    size: int
    inserted: int = Field(description="transitions ever inserted into this memory")
    restored: bool = Field(description="this container had no memory of a job that had one: "
                                       "it read the snapshot, if any, and counts what was lost")
    lost: int = Field(description="acknowledged transitions a restore did not bring back")
    snapshot_s: float | None = Field(description="a snapshot taken in this call, its time")
    bytes_per_transition: int
    run_s: float


class IngestResult(BufferResult):
    added: int
    rejected: list[Rejection]


class SampleResult(BufferResult):
    key: str | None = Field(description="the sampled batches' blob; none when the memory is "
                                        "empty (a replaced buffer found no snapshot)")
    rows: int
    bytes: int
    priority_mean: float | None = Field(description="mean priority p_i of the sampled "
                                                    "transitions")
    priorities_applied: int
    priorities_stale: int = Field(description="updates for slots overwritten since sampled")


BufferArgs = Annotated[IngestArgs | SampleArgs, Field(discriminator="mode")]
BUFFER_ARGS: TypeAdapter[BufferArgs] = TypeAdapter(BufferArgs)


# ------------------------------------------------------------------------------ served policies
class PolicyConfig(BaseModel):
    """What a policy function serves (``functions/policy``), from its manifest's environment:
    so a snapshot of the manifest (a published function version) names its model version."""

    model_config = CONTRACT
    job: str = Field(description="the job whose model it serves")
    version: int = Field(ge=0, description="the model version (its served copy: "
                                           "faasrl.data.keys.served_key)")
    redis: Credentials = Field(description="the job's serving user (faasrl.data.acl)")

    def to_env(self) -> dict[str, str]:
        return {POLICY_ENV: self.model_dump_json()}

    @classmethod
    def from_env(cls, environ: dict[str, str]) -> PolicyConfig:
        if POLICY_ENV not in environ:
            raise ContractError(f"{POLICY_ENV} is not set: this function serves a job's policy "
                                "once deployed by `faasrl jobs serve JOB` (POST "
                                "/v1/jobs/{id}/serve)")
        return parse(cls, json.loads(environ[POLICY_ENV]), "policy function config")


POLICY_ENV = "FAASRL_POLICY"  # the manifest's environment variable holding a PolicyConfig
