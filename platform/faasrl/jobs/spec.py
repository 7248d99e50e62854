"""What a training job is: algorithm, environment, controller, hyper-parameters, stop conditions.

Hyper-parameters a job leaves out take defaults for its environment's family (classic control,
MuJoCo, Atari), so ``{"env_id": "CartPole-v1"}`` alone is a complete job.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from faasrl.controllers.spec import ControllerSpec, FixedController
from faasrl.jobs.cost import Pricing
from faasrl.rl.envs import check_env_id, env_family

_STRICT = ConfigDict(extra="forbid")


class PPOHyperparameters(BaseModel):
    """The fields of ``faasrl.rl.ppo.PPOConfig``, validated."""

    model_config = _STRICT

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


class StopConditions(BaseModel):
    """A job stops at the first condition met; at least one must bound it."""

    model_config = _STRICT
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

    model_config = _STRICT
    actors: Literal["local", "lambda"] | None = Field(
        None, description="None: where the actor function's manifest places it")


class JobSpec(BaseModel):
    model_config = _STRICT

    name: str | None = Field(None, max_length=200)
    algorithm: Literal["ppo"] = "ppo"
    env_id: str = Field(description="a gymnasium id: CartPole-v1, Hopper-v5, ALE/Pong-v5, ...")
    controller: ControllerSpec = Field(default_factory=FixedController)
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

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("env_id"), str):
            return data
        defaults = FAMILY_DEFAULTS[env_family(data["env_id"])]
        data = {**data}
        hp = data.get("hyperparameters") or {}
        if isinstance(hp, dict):
            data["hyperparameters"] = {**defaults["hyperparameters"], **hp}
        for key in ("envs_per_actor", "steps_per_actor"):
            data.setdefault(key, defaults[key])
        return data

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
