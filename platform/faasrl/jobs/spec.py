"""What a training job is: algorithm, environment, controller, hyper-parameters, stop conditions.

The algorithm's own module (:mod:`faasrl.algorithms`) validates its hyper-parameters and says
what a job leaves out takes, per environment family (classic control, MuJoCo, Atari; an env
brought as code is "other"), so ``{"env_id": "CartPole-v1"}`` alone is a complete job.

The environment is a gymnasium id (``env_id``) or code (``env``, :mod:`faasrl.env_code`).
Nothing here imports a user's module: what such an env is, the job manager asks a ``describe``
invocation of the actor function (:mod:`faasrl.jobs.env_probe`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError, PydanticOmit

from faasrl.algorithms import ALGORITHMS, AlgorithmConfig, AlgorithmName
from faasrl.contracts import AggregationSpec, StellarisAggregation
from faasrl.controllers.spec import ControllerSpec, FixedController
from faasrl.env_code import EnvCode
from faasrl.invoker.versions import ALIAS_MAX, ALIAS_NAME
from faasrl.jobs.clock import EXECUTION_ROLES, Clock, VirtualSettings
from faasrl.jobs.cost import Pricing
from faasrl.jobs.executions import ExecutionName
from faasrl.manifest import FUNCTION_NAME
from faasrl.rl.env_backends import EnvBackend, resolve
from faasrl.rl.envs import check_env_id, env_family
from faasrl.user_input import STRICT

Loc = tuple[int | str, ...]  # where a value is in the spec, as pydantic's errors say
# What a job's algorithm fills in: not missing when the algorithm is unknown (its error says it).
FILLED: set[Loc] = {("hyperparameters",), ("envs_per_actor",), ("steps_per_actor",)}


def _family_defaults(key: str) -> str:
    """What a job that leaves ``key`` out gets, per algorithm and env family (its schema can
    name no single default)."""
    per_algorithm = (", ".join(f"{family} {d[key]}" for family, d in m.FAMILY_DEFAULTS.items())
                     for m in ALGORITHMS.values())
    return "default: " + "; ".join(f"{name}: {text}"
                                   for name, text in zip(ALGORITHMS, per_algorithm, strict=True))


def _filled_not_required(schema: dict[str, Any]) -> None:
    """A job may leave out what its algorithm fills in: the schema must not require it."""
    schema["required"] = [k for k in schema.get("required", []) if (k,) not in FILLED]


class AsyncSettings(BaseModel):
    """Asynchronous execution (``execution: async``): actors sample continuously, learners
    compute gradients whenever batches wait, the parameter function aggregates them.

    The defaults are what the authors' code runs: each round's batch cut into 4 slices, 10
    passes of one gradient per slice, each gradient its own Adam step. ``sgd_iters: 1,
    learner_slices: null, optimizer_step: weighted_mean`` is the one-gradient-per-batch mode of
    before (the paper's text read literally).
    """

    model_config = STRICT
    max_learners: int = Field(4, ge=1, le=256, description="concurrent learner functions "
                                                           "(the paper: 4 per GPU)")
    sgd_iters: int = Field(10, ge=1, le=100, description="passes over the round's batch, one "
                                                         "gradient per slice each (the "
                                                         "authors' num_sgd_iter)")
    learner_slices: int | None = Field(
        4, ge=1, le=4096, description="slices of whole env trajectories the round's batch is "
                                      "cut into (the authors: one per learner, 4); null: one "
                                      "per actor batch")
    aggregation: AggregationSpec = Field(default_factory=StellarisAggregation)
    optimizer_step: Literal["weighted_mean", "per_gradient"] = Field(
        "per_gradient", description="one Adam step per gradient (the authors'), or one on "
                                    "the weighted mean (a uniform scale cancels in Adam)")
    backlog: int | None = Field(None, ge=1, le=4096, description="waiting batches at which "
                                "actors pause (default: max_learners)")


LEGACY = ("ppo", "impact")  # the algorithms before issue 16, whose layout is still accepted
ONE_WIDTH = ("dqn", "sac")  # took one ``hidden`` width before the ``model`` section: still do


def _ignored_before(key: str, config: type[BaseModel]) -> bool:
    """Whether a job of ``config``'s algorithm took ``key`` before issue 16 and ignored it: it
    belongs to another algorithm's Config of that time."""
    return key not in config.model_fields and any(
        key in ALGORITHMS[name].Config.model_fields for name in LEGACY)


def _relocated(data: dict[str, Any], config: type[BaseModel]
               ) -> tuple[dict[str, Any], dict[str, Any], dict[Loc, Loc]]:
    """The spec's hyper-parameters and ``asynchronous`` in today's layout, and where each moved
    key was written (its errors name that place).

    The layout before issue 16, still accepted: ``hyperparameters`` was PPO's model for every
    algorithm (no ``algorithm`` tag inside), and ``asynchronous`` held PPO's ``truncation`` and
    ``rho`` and IMPACT's ``impact: {...}``. Keys the algorithm's Config has move into its
    hyper-parameters (an explicit one wins); those it ignored then are dropped.
    """
    hp = {**data.get("hyperparameters", {})}
    if "algorithm" not in hp:
        hp = {k: v for k, v in hp.items() if not _ignored_before(k, config)}
    asynchronous = data.get("asynchronous", {})
    if not isinstance(asynchronous, dict):
        return hp, asynchronous, {}
    asynchronous = {**asynchronous}
    old = [(k, asynchronous.pop(k), ("asynchronous", k)) for k in ("truncation", "rho")
           if k in asynchronous]
    if isinstance(asynchronous.get("impact"), dict):
        old += [(k, v, ("asynchronous", "impact", k))
                for k, v in asynchronous.pop("impact").items()]
    moved: dict[Loc, Loc] = {}
    for key, value, loc in old:
        if not _ignored_before(key, config):
            hp.setdefault(key, value)
            moved[("hyperparameters", key)] = loc
    return hp, asynchronous, moved


def _legacy_hidden(hp: dict[str, Any], family: str) -> tuple[dict[str, Any], dict[Loc, Loc]]:
    """DQN's and SAC's one ``hidden`` width of before the ``model`` section, as the network it
    meant: two layers that wide, or one after Atari's CNN (an explicit ``model.hidden`` wins)."""
    width = hp.get("hidden")
    if not isinstance(width, int) or isinstance(width, bool) or \
            not isinstance(hp.get("model", {}), dict):
        return hp, {}
    hp = {k: v for k, v in hp.items() if k != "hidden"}
    widths = [width] if family == "atari" else [width, width]
    hp["model"] = {"hidden": widths, **hp.get("model", {})}
    here, there = ("hyperparameters", "model", "hidden"), ("hyperparameters", "hidden")
    return hp, {**{(*here, i): there for i in range(len(widths))}, here: there}


def _with_defaults(defaults: dict[str, Any], hp: dict[str, Any]) -> dict[str, Any]:
    """The spec's hyper-parameters over the family's defaults, section by section (``model``:
    a job that sets its activation keeps the family's widths)."""
    return {**defaults, **hp, **{k: {**v, **hp[k]} for k, v in defaults.items()
                                 if isinstance(v, dict) and isinstance(hp.get(k), dict)}}


def _where(loc: Loc, moved: dict[Loc, Loc]) -> Loc:
    for new, old in moved.items():
        if loc[:len(new)] == new:
            return old + loc[len(new):]
    return loc


def _env_part(env: Any, name: str) -> Any:
    """A field of the spec's ``env`` as the spec gives it (a mapping, or an EnvCode)."""
    return env.get(name) if isinstance(env, dict) else getattr(env, name, None)


def _family(env: Any, env_id: Any) -> str | None:
    """The env's family in the spec as given: an env brought as code is "other", as
    ``env_family`` says of it; None when the spec names no env."""
    if env is not None:
        return "other"
    return env_family(env_id) if isinstance(env_id, str) else None


def _named_env_id(data: dict[str, Any]) -> dict[str, Any]:
    """An env given by its entry point is named by it unless ``env_id`` names it."""
    entry = _env_part(data.get("env"), "entry_point")
    if data.get("env_id") is None and isinstance(entry, str):
        return {**data, "env_id": entry}
    return data


IMPORTS_NEED_ID = PydanticCustomError(
    "missing", "Field required: with env.imports, env_id is the id the imported module "
               "registers")


def _explained(error: Any, data: dict[str, Any]) -> Any:
    """A missing ``env_id`` next to ``env.imports`` says which id it wants."""
    if error["loc"] == ("env_id",) and error["type"] == "missing" \
            and _env_part(data.get("env"), "imports"):
        return {**error, "type": IMPORTS_NEED_ID}
    return error


class StopConditions(BaseModel):
    """A job stops at the first condition met; at least one must bound it."""

    model_config = STRICT
    target_reward: float | None = Field(None, description="mean of the last target_window "
                                                          "episode returns")
    target_window: int = Field(20, ge=1, le=10_000)
    confirm_target: bool = Field(True, description="stop on target_reward only once an "
                                                   "evaluation of the current policy reaches it")
    max_rounds: int | None = Field(500, ge=1)
    max_env_steps: int | None = Field(None, ge=1)
    budget_usd: float | None = Field(None, gt=0)
    max_wall_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _bounded(self) -> StopConditions:
        if all(v is None for v in (self.max_rounds, self.max_env_steps, self.budget_usd,
                                   self.max_wall_s)):
            raise ValueError("set at least one of max_rounds, max_env_steps, budget_usd, "
                             "max_wall_s: a job needs an end")
        return self


class EvaluationSettings(BaseModel):
    """What the job's final evaluation adds to its returns."""

    model_config = STRICT
    video: bool = Field(False, description="record episodes of the final version to mp4 "
                                           "(a registered env that renders RGB frames)")
    episodes: int = Field(1, ge=1, le=10, description="episodes recorded, each at most "
                                                      "1000 frames")


class ServeSettings(BaseModel):
    """Publish the job's policy to a serving alias as it trains: every ``every`` rounds (and at
    its end) the latest version is served by the policy function ``name``, published as a
    function version and the alias moved to it. Roll back by moving the alias to an earlier
    version (``PUT /v1/functions/{name}/aliases/{alias}``): the newest ``keep`` stay
    published (each one's weights are a served copy in Redis: a long job would otherwise
    keep one per publication)."""

    model_config = STRICT
    alias: str = Field(pattern=ALIAS_NAME, max_length=ALIAS_MAX,
                       description="the alias moved to each new version, e.g. live")
    every: int = Field(10, ge=1, description="rounds between publications")
    keep: int = Field(5, ge=1, le=1000, description="published versions kept besides those "
                                                   "an alias routes to: older ones go, with "
                                                   "the weights only they served")
    name: str | None = Field(None, pattern=FUNCTION_NAME,
                             description="the policy function's name; null: '<job id>-policy'")


class Placement(BaseModel):
    """Where a job's functions run. Actors may go to AWS Lambda (the function's ``aws_lambda``
    twin); learners always run on this platform's containers, next to their GPUs."""

    model_config = STRICT
    actors: Literal["local", "lambda"] | None = Field(
        None, description="None: where the actor function's manifest places it")


class JobSpec(BaseModel):
    model_config = ConfigDict(**STRICT, json_schema_extra=_filled_not_required)

    name: str | None = Field(None, max_length=200)
    algorithm: AlgorithmName = Field(
        "ppo", description="impact (V-trace + target network) runs asynchronously; dqn and "
                           "sac off-policy")
    execution: ExecutionName = Field(
        "sync", description="sync: rounds of actors then one learner; async: Stellaris-style "
                          "asynchronous learners; offpolicy: continuous actors, a replay-buffer "
                          "function, a learner sampling it (default: the algorithm's first)")
    env: EnvCode | None = Field(
        None, description="the environment as code (an uploaded archive); None: env_id is a "
                          "gymnasium id")
    env_id: str = Field(description="a gymnasium id: CartPole-v1, Hopper-v5, ALE/Pong-v5, ...; "
                                    "with env.imports, the id the module registers; with "
                                    "env.entry_point, a name (default: the entry point)")
    env_backend: EnvBackend | None = Field(
        None, validate_default=True,
        description="what steps the training envs: envpool (C++, batched; Atari's ALE/*-v5, "
                    "CartPole-v1 and MuJoCo's Hopper, HalfCheetah and Walker2d v5) or "
                    "gymnasium's Python envs; None: envpool for the MuJoCo envs (where it "
                    "speeds actors up), else gymnasium. An env brought as code is gymnasium's")
    controller: ControllerSpec = Field(default_factory=FixedController)
    asynchronous: AsyncSettings = Field(default_factory=AsyncSettings)
    clock: Clock = Field("real", description="real: the workflow sees results as they come "
                                             "back; virtual: in the order the cluster of "
                                             "`virtual` would produce them")
    virtual: VirtualSettings | None = Field(None, validate_default=True,
                                            description="the modeled cluster, with clock: "
                                                        "virtual")
    hyperparameters: AlgorithmConfig = Field(
        description="the algorithm's (its tag may be left out); left out, or any field of it: "
                    "the algorithm's default for the env's family")
    envs_per_actor: int = Field(ge=1, le=256, description="vector envs inside one actor; "
                                + _family_defaults("envs_per_actor"))
    steps_per_actor: int = Field(ge=1, le=100_000, description="steps per env per round; "
                                 + _family_defaults("steps_per_actor"))
    seed: int = Field(1, ge=0, le=2**31 - 1)
    priority: float = Field(1.0, gt=0, le=100, description="its share of contended capacity "
                                                           "relative to other jobs'")
    stop: StopConditions = Field(default_factory=StopConditions)
    pricing: Pricing = Field(default_factory=Pricing)
    evaluation_episodes: int = Field(20, ge=0, le=1000)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    serve: ServeSettings | None = Field(None, description="publish the policy to a serving "
                                                          "alias as the job trains")
    checkpoint_every: int = Field(10, ge=1, description="rounds between disk checkpoints")
    tensorboard: bool = Field(False, description="write TensorBoard event files of the metrics "
                                                 "rows as rounds end, to <state_dir>/jobs/<id>/"
                                                 "tensorboard")
    compress_trajectories: bool | None = Field(None, description="lz4; default on for Atari")
    lend_actor_cores: bool | None = Field(
        None, description="the learner also runs on its actors' cores while they wait for it "
        "(synchronous rounds: while it learns; off-policy: while the replay ratio holds them "
        "back), lent where the node has them free, up to the learner manifest's cpu_max; it "
        "pays for a conv net's update, not for a small MLP's, whose ops are too small to "
        "split; None: on for Atari")
    placement: Placement = Field(default_factory=Placement)
    # The job's namespace's function of the name, else default's built-in (job_manager.py
    # resolves them at submit; the record keeps the platform's name, the API shows it bare).
    actor_function: str = "actor"
    learner_function: str = "learner"
    parameter_function: str = Field("parameter", description="aggregates gradients (async)")
    buffer_function: str = Field("buffer", description="holds the replay memory (offpolicy)")

    @model_validator(mode="wrap")
    @classmethod
    def _family_defaults(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]
                         ) -> JobSpec:
        """Fill what the spec leaves out with its algorithm's defaults for the env's family."""
        if not isinstance(data, dict):
            return handler(data)
        data = {**_named_env_id(data)}  # filled in below: the caller's stays as it was
        family = _family(data.get("env"), data.get("env_id"))
        hp = data.get("hyperparameters") or {}
        if family is not None and data.get("algorithm") is None and isinstance(hp, dict):
            data["algorithm"] = hp.get("algorithm", "ppo")
        name = data.get("algorithm")
        module = ALGORITHMS.get(name) if isinstance(name, str) else None
        moved: dict[Loc, Loc] = {}
        if family is not None and module is not None and isinstance(hp, dict):
            defaults = module.FAMILY_DEFAULTS[family]
            hp, data["asynchronous"], moved = _relocated({**data, "hyperparameters": hp},
                                                         module.Config)
            if name in ONE_WIDTH:
                hp, legacy = _legacy_hidden(hp, family)
                moved.update(legacy)
            data["hyperparameters"] = _with_defaults(defaults.get("hyperparameters", {}), hp)
            if data.get("execution") is None:
                data["execution"] = module.EXECUTIONS[0]
            for key in ("envs_per_actor", "steps_per_actor"):
                data.setdefault(key, defaults[key])
        try:
            return handler(data)
        except ValidationError as exc:
            said = exc.errors()
            errors = [_explained({**e, "loc": _where(e["loc"], moved)}, data) for e in said
                      if (family is not None and module is not None) or e["type"] != "missing"
                      or e["loc"] not in FILLED]
            if errors == said:
                raise
            raise ValidationError.from_exception_data(exc.title, errors) from None  # type: ignore[arg-type]

    @field_validator("virtual")
    @classmethod
    def _virtual_with_its_clock(cls, virtual: VirtualSettings | None, info: ValidationInfo
                                ) -> VirtualSettings | None:
        clock, execution = info.data.get("clock"), info.data.get("execution")
        if clock == "virtual" and virtual is None:
            raise ValueError("required with clock: virtual (the modeled cluster's cores and "
                             "calibration)")
        if clock == "real" and virtual is not None:
            raise ValueError("only with clock: virtual")
        if virtual is not None and isinstance(execution, str):
            if (roles := EXECUTION_ROLES.get(execution)) is None:
                raise ValueError(f"the virtual clock does not run {execution} jobs")
            if missing := [r for r in roles if r not in virtual.calibration]:
                raise ValueError(f"calibration lacks {', '.join(missing)} "
                                 f"(execution: {execution})")
        return virtual

    @field_validator("execution")
    @classmethod
    def _supported_execution(cls, execution: str, info: ValidationInfo) -> str:
        name = info.data.get("algorithm")
        if name is not None and execution not in ALGORITHMS[name].EXECUTIONS:
            raise ValueError(f"algorithm {name} runs only with execution "
                             f"{' or '.join(ALGORITHMS[name].EXECUTIONS)}")
        return execution

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _algorithm_config(cls, hp: Any, info: ValidationInfo) -> Any:
        """Validated by the algorithm's own model, so that a refusal names
        ``hyperparameters.<field>`` (the union alone would put the tag in the path)."""
        name = info.data.get("algorithm")
        if name is None:
            raise PydanticOmit  # the algorithm's own error says it all
        return ALGORITHMS[name].Config.model_validate(hp)

    @field_validator("env")
    @classmethod
    def _env_named(cls, env: EnvCode | None) -> EnvCode | None:
        if env is not None and env.entry_point is None and not env.imports:
            raise ValueError("name the env: entry_point (module:attribute), or imports of a "
                             "module that registers the job's env_id")
        return env

    @field_validator("env_id")
    @classmethod
    def _known_env(cls, env_id: str, info: ValidationInfo) -> str:
        """A plain gymnasium id must be registered here; an env brought as code is checked by
        the probe (and one whose ``env`` is invalid has that error already)."""
        if "env" in info.data and info.data["env"] is None:
            check_env_id(env_id)
        return env_id

    @field_validator("env_backend")
    @classmethod
    def _runnable_backend(cls, backend: EnvBackend | None, info: ValidationInfo
                          ) -> EnvBackend | None:
        """EnvPool only where it gives the platform's semantics; None is resolved here, at
        submit, so that the record names the backend and a restored job keeps it."""
        if "env_id" not in info.data or "env" not in info.data:
            return backend  # the env's own error says it
        return resolve(info.data["env_id"], info.data["env"], backend)

    @property
    def backend(self) -> EnvBackend:
        """The backend the job's actors run (``env_backend``, resolved)."""
        return resolve(self.env_id, self.env, self.env_backend)

    @property
    def family(self) -> str:
        return env_family(self.env_id, self.env)

    @property
    def lends_actor_cores(self) -> bool:
        return self.family == "atari" if self.lend_actor_cores is None \
            else self.lend_actor_cores

    @property
    def compress(self) -> bool:
        return self.family == "atari" if self.compress_trajectories is None \
            else self.compress_trajectories


# The spec's fields that name a function.
FUNCTION_FIELDS = ("actor_function", "learner_function", "parameter_function", "buffer_function")
