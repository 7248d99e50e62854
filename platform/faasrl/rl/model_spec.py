"""The ``model`` section of every algorithm's Config: which network a job trains.

No torch here: the gateway validates job specs with it. The torch side builds what it says
(:func:`faasrl.rl.policy.with_network`, the algorithms' ``make_model``).

``hidden`` are the widths of the fully connected layers: the whole MLP over flat observations,
or the layers after a CNN's convolutions. ``activation`` follows each of them (a CNN's
convolutions keep their ReLUs). ``cnn`` picks the convolutional trunk for image observations
(nature or impala); ``auto`` takes the Nature CNN for 3-D uint8 observations (stacked frames,
channels first) large enough for it, and an MLP over the flattened observation otherwise.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from faasrl.user_input import STRICT, Integer

# Activation name -> its torch.nn class name (the torch side looks the class up by it).
ACTIVATIONS: dict[str, str] = {"tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "gelu": "GELU",
                               "silu": "SiLU", "leaky_relu": "LeakyReLU"}
Activation = Literal[tuple(ACTIVATIONS)]  # type: ignore[valid-type]
# Convolutional trunks -> the smallest height and width they take (nature: Mnih et al.'s three
# convolutions; impala: Espeholt et al.'s residual stacks, rl/cnn.py).
CNNS: dict[str, int] = {"nature": 36, "impala": 1}
Cnn = Literal[("auto", "none", *CNNS)]  # type: ignore[valid-type]
Width = Annotated[Integer, Field(ge=1, le=16_384)]


class NetworkError(ValueError):
    """A network the observations cannot take; ``field`` names the model section's field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"model.{field}: {message}")
        self.field, self.message = field, message


class ModelSpec(BaseModel):
    """DQN's and SAC's networks: ReLU MLPs of two 256-wide layers by default."""

    model_config = STRICT

    hidden: list[Width] = Field([256, 256], min_length=1, max_length=16,
                                description="widths of the fully connected layers (after the "
                                            "CNN's convolutions when there is one)")
    activation: Activation = Field("relu", description="after each fully connected layer")
    cnn: Cnn = Field("auto", description="the trunk over image observations; auto: nature "
                                         "for 3-D uint8 observations it fits, else none (an "
                                         "MLP over the flattened observation)")


class ActorCriticModelSpec(ModelSpec):
    """PPO's and IMPACT's actor-critic: CleanRL's, two 64-wide tanh layers by default."""

    hidden: list[Width] = Field([64, 64], min_length=1, max_length=16,
                                description="widths of the fully connected layers (after the "
                                            "CNN's convolutions when there is one)")
    activation: Activation = Field("tanh", description="after each fully connected layer")
    shared_trunk: bool | None = Field(
        None, description="one trunk under the actor and critic heads, or one network each; "
                          "default: shared after a CNN, separate MLPs otherwise")
    log_std_init: Annotated[float, Field(ge=-5.0, le=2.0)] | None = Field(
        None, description="continuous actions: the initial log standard deviation of the "
                          "policy's Normal (state-independent, learned from there); default 0, "
                          "a standard deviation of 1. Discrete actions have none")


class MLPModelSpec(ModelSpec):
    """SAC's networks: its actor and critics take flat observations (and actions)."""

    cnn: Literal["none"] = Field("none", description="SAC takes flat observations: no CNN")


def trunk(model: ModelSpec, obs_shape: tuple[int, ...], obs_dtype: str) -> str | None:
    """The CNN ``model`` puts over observations of ``obs_shape`` (None: an MLP); a
    :class:`NetworkError` when they cannot take it."""
    images = len(obs_shape) == 3 and obs_dtype == "uint8"
    if model.cnn == "auto":
        cnn = "nature" if images and min(obs_shape[1:]) >= CNNS["nature"] else None
    elif model.cnn == "none":
        cnn = None
    elif not images or min(obs_shape[1:]) < CNNS[model.cnn]:
        raise NetworkError("cnn", f"{model.cnn} needs uint8 images of shape (channels, "
                                  f"height, width), height and width at least "
                                  f"{CNNS[model.cnn]}; the observations are "
                                  f"{obs_dtype} {tuple(obs_shape)}")
    else:
        cnn = model.cnn
    if cnn is not None and getattr(model, "shared_trunk", None) is False:
        raise NetworkError("shared_trunk", "the actor and critic share a CNN trunk: separate "
                                           "trunks are for MLPs")
    return cnn
