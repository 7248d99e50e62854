"""A job's environment as code, and what a probe found it to be: the models both sides share.

A job names its environment by a registered gymnasium id (``env_id: CartPole-v1``) or brings it
as code (``env: {code_sha256, entry_point, kwargs, max_episode_steps}``; or ``imports`` of a
module that registers the id named in ``env_id``). The archive is uploaded like function code
(``POST /v1/code``) and reaches the job's functions through the job's own Redis keys. The
gateway never imports it: a ``describe`` invocation of the actor function builds the env,
runs gymnasium's env checker and answers an :class:`EnvDescription`, which the gateway keeps
with the job. No gymnasium or torch here: the gateway imports this module.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from faasrl.code_archive import SHA256_PATTERN
from faasrl.user_input import STRICT

ENTRY_POINT = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
MODULE = r"^[A-Za-z_][\w.]*$"
# Where building or probing an env failed: its archive (code), importing its modules, making
# it, its spaces (one the algorithms cannot take), reset, step, gymnasium's env checker.
EnvStage = Literal["code", "import", "make", "spaces", "reset", "step", "check"]


class EnvCode(BaseModel):
    """Where a job's environment comes from when gymnasium's registry does not know it."""

    model_config = STRICT
    code_sha256: str | None = Field(None, pattern=SHA256_PATTERN,
                                    description="the env's archive, uploaded with POST /v1/code")
    code_dir: str | None = Field(None, description="a folder on the client: `faasrl submit` "
                                                   "packs and uploads it (code_sha256); the "
                                                   "gateway itself takes only code_sha256")
    entry_point: str | None = Field(None, pattern=ENTRY_POINT,
                                    description="module:attribute, a gymnasium.Env class or a "
                                                "function returning an env, called with kwargs")
    imports: list[str] = Field(default_factory=list, max_length=32,
                               description="modules imported first: one that registers "
                                           "gymnasium ids, whose id the job's env_id names")
    kwargs: dict[str, Any] = Field(default_factory=dict,
                                   description="keyword arguments of entry_point (JSON)")
    max_episode_steps: int | None = Field(None, ge=1, description="episodes cut at this step "
                                          "are truncated (bootstrapped), not terminated")


class EnvDescription(BaseModel):
    """What the ``describe`` probe found the env to be, after the platform's preprocessing:
    enough to pick the network and check the algorithm without building the env again."""

    model_config = STRICT
    family: Literal["classic", "mujoco", "atari", "other"]
    obs_shape: list[int]
    obs_dtype: Literal["float32", "uint8"]
    obs_space: str = Field(description="the env's own observation space, as gymnasium "
                                       "prints it (before flattening)")
    action_kind: Literal["discrete", "continuous"]
    action_dim: int = Field(ge=1)
    action_low: list[float] = Field(default_factory=list)
    action_high: list[float] = Field(default_factory=list)
    action_space: str = Field(description="the env's own action space, as gymnasium prints it")
    reward_range: list[float] | None = None
    max_episode_steps: int | None = None
    checker_warnings: list[str] = Field(default_factory=list,
                                        description="what gymnasium's env checker warned of")
    preprocessing: dict[str, Any] | None = Field(
        None, description="how the platform builds it: gymnasium.make's arguments or the "
                          "code, then wrappers in order (faasrl.rl.envs.env_preprocessing); "
                          "model files carry it")
