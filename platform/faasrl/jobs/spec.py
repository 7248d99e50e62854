"""What a training job is: algorithm, environment, controller, hyper-parameters, stop conditions.

Hyper-parameters a job leaves out take defaults for its environment's family (classic control,
MuJoCo, Atari), so ``{"env_id": "CartPole-v1"}`` alone is a complete job.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from faasrl.controllers.spec import ControllerSpec, FixedController
from faasrl.inputs import STRICT
from faasrl.jobs.cost import Pricing
from faasrl.rl.envs import check_env_id, env_family


class PPOHyperparameters(BaseModel):
    """The fields of ``faasrl.rl.ppo.PPOConfig``, validated."""

    model_config = STRICT

    learning_rate: float = Field(2.5e-4, gt=0, le=1)
    anneal_lr: bool = True
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    update_epochs: int = Field(4, ge=1, le=100)
    num_minibatches: int = Field(4, ge=1, le=4096)
    norm_adv: bool = True
    clip_coef: float = Field(0.2, gt=0, le=10)
    clip_vloss: bool = True
    ent_coef: float = Field(0.01, ge=0)
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(0.5, gt=0)
    target_kl: float | None = Field(None, gt=0)
    kl_coef: float = Field(0.0, ge=0, description="adaptive KL penalty; 0 = off")
    kl_target: float = Field(0.01, gt=0)


# Per family: PPO hyper-parameters, envs per actor and steps per env per round.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "classic": {"hyperparameters": {"learning_rate": 1e-3, "ent_coef": 0.0},
                "envs_per_actor": 4, "steps_per_actor": 128},
    "mujoco": {"hyperparameters": {"learning_rate": 3e-4, "update_epochs": 10,
                                   "num_minibatches": 32, "ent_coef": 0.0},
               "envs_per_actor": 1, "steps_per_actor": 2048},
    "atari": {"hyperparameters": {"learning_rate": 2.5e-4, "clip_coef": 0.1},
              "envs_per_actor": 8, "steps_per_actor": 128},
}
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["classic"]


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


AggregationSpec = Annotated[StellarisAggregation | AsyncAggregation | SoftSyncAggregation
                            | SSPAggregation, Field(discriminator="rule")]


class ImpactSettings(BaseModel):
    """IMPACT's V-trace and target network (its other coefficients are in hyperparameters)."""

    model_config = STRICT
    rho_bar: float = Field(1.0, gt=0, description="V-trace ρ̄")
    c_bar: float = Field(1.0, gt=0, description="V-trace c̄")
    is_ratio_clip: float = Field(2.0, gt=0, description="clip of π_target/μ in the surrogate")
    target_update_frequency: int = Field(
        1, ge=1, le=64, description="the target network trails the policy by this many versions")


class AsyncSettings(BaseModel):
    """Asynchronous execution (``execution: async``): actors sample continuously, learners
    compute gradients whenever batches wait, the parameter function aggregates them."""

    model_config = STRICT
    max_learners: int = Field(4, ge=1, le=256, description="concurrent learner functions "
                                                           "(the paper: 4 per GPU)")
    aggregation: AggregationSpec = Field(default_factory=StellarisAggregation)
    optimizer_step: Literal["weighted_mean", "per_gradient"] = Field(
        "weighted_mean", description="one Adam step on the weighted mean (a uniform scale "
                                     "cancels in Adam), or one Adam step per gradient")
    truncation: Literal["paper", "artifact", "off"] = Field(
        "paper", description="PPO's cross-learner importance-ratio cap: min(r, R') (paper), "
                             "min(r, max(min_i r_i, ρ)) (authors' code) or none")
    rho: float = Field(1.0, gt=0, description="the truncation threshold ρ")
    backlog: int | None = Field(None, ge=1, le=4096, description="waiting batches at which "
                                "actors pause (default: max_learners)")
    impact: ImpactSettings = Field(default_factory=ImpactSettings)


# IMPACT's coefficients from the Stellaris paper's table (RLlib's tuned examples).
IMPACT_DEFAULTS: dict[str, Any] = {"learning_rate": 5e-4, "clip_coef": 0.4, "kl_coef": 1.0,
                                   "ent_coef": 0.01, "vf_coef": 1.0}


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


class Placement(BaseModel):
    """Where a job's functions run. Actors may go to AWS Lambda (the function's ``aws_lambda``
    twin); learners always run on this platform's containers, next to their GPUs."""

    model_config = STRICT
    actors: Literal["local", "lambda"] | None = Field(
        None, description="None: where the actor function's manifest places it")


class JobSpec(BaseModel):
    model_config = STRICT

    name: str | None = Field(None, max_length=200)
    algorithm: Literal["ppo", "impact"] = Field(
        "ppo", description="impact (V-trace + target network) runs asynchronously")
    execution: Literal["sync", "async"] = Field(
        "sync", description="sync: rounds of actors then one learner; async: Stellaris-style "
                          "asynchronous learners (default: async for impact, else sync)")
    env_id: str = Field(description="a gymnasium id: CartPole-v1, Hopper-v5, ALE/Pong-v5, ...")
    controller: ControllerSpec = Field(default_factory=FixedController)
    asynchronous: AsyncSettings = Field(default_factory=AsyncSettings)
    hyperparameters: PPOHyperparameters
    envs_per_actor: int = Field(ge=1, le=256, description="vector envs inside one actor")
    steps_per_actor: int = Field(ge=1, le=100_000, description="steps per env per round")
    seed: int = Field(1, ge=0, le=2**31 - 1)
    stop: StopConditions = Field(default_factory=StopConditions)
    pricing: Pricing = Field(default_factory=Pricing)
    evaluation_episodes: int = Field(20, ge=0, le=1000)
    checkpoint_every: int = Field(10, ge=1, description="rounds between disk checkpoints")
    compress_trajectories: bool | None = Field(None, description="lz4; default on for Atari")
    placement: Placement = Field(default_factory=Placement)
    actor_function: str = "actor"
    learner_function: str = "learner"
    parameter_function: str = Field("parameter", description="aggregates gradients (async)")

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("env_id"), str):
            return data
        defaults = FAMILY_DEFAULTS[env_family(data["env_id"])]
        data = {**data}
        impact = data.get("algorithm") == "impact"
        hp = data.get("hyperparameters") or {}
        if isinstance(hp, dict):
            data["hyperparameters"] = {**defaults["hyperparameters"],
                                       **(IMPACT_DEFAULTS if impact else {}), **hp}
        if data.get("execution") is None:
            data["execution"] = "async" if impact else "sync"
        for key in ("envs_per_actor", "steps_per_actor"):
            data.setdefault(key, defaults[key])
        return data

    @field_validator("execution")
    @classmethod
    def _impact_is_async(cls, execution: str, info: ValidationInfo) -> str:
        if info.data.get("algorithm") == "impact" and execution != "async":
            raise ValueError("algorithm impact runs only with execution async")
        return execution

    @field_validator("env_id")
    @classmethod
    def _known_env(cls, env_id: str) -> str:
        check_env_id(env_id)
        return env_id

    @property
    def family(self) -> str:
        return env_family(self.env_id)

    @property
    def compress(self) -> bool:
        return self.family == "atari" if self.compress_trajectories is None \
            else self.compress_trajectories
