"""The actor-critic network, and the spec that is enough to rebuild it anywhere (actor or learner).

Everything an observation needs before the layers (pixel scaling, running normalisation) happens
inside the model, so actors feed raw observations and ship one ``state_dict`` that carries both
the weights and the normalisation statistics.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from faasrl.env_code import EnvCode, EnvDescription
from faasrl.rl.cnn import flat_size, impala_cnn
from faasrl.rl.envs import describe
from faasrl.rl.model_spec import ACTIVATIONS, trunk

if TYPE_CHECKING:
    from faasrl.rl.model_spec import ModelSpec

_OBS_DTYPES = ("float32", "uint8")
_ACTION_KINDS = ("discrete", "continuous")
# The model section's ``cnn`` -> PolicySpec.arch ("cnn", the Nature CNN, keeps its old name).
ARCHS: dict[str | None, str] = {None: "mlp", "nature": "cnn", "impala": "impala"}
# What features() does to a raw observation (model files state the same: rl/model_card.py).
OBS_EPS, OBS_CLIP = 1e-8, 10.0  # normalised: clip((obs - mean) / sqrt(var + eps), -clip, clip)
PIXEL_SCALE = 255.0  # CNN input without normalisation: obs / PIXEL_SCALE
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # a standard normal's log-density is -z^2/2 - this


@dataclass(frozen=True)
class PolicySpec:
    """Shapes and architecture of a network; JSON-friendly via ``to_dict``.

    ``hidden`` is the MLP's layer widths, or for ``arch="cnn"`` (the Nature CNN) and
    ``"impala"`` the fully connected widths after the convolutions (``(512,)`` for Atari), each
    followed by ``activation``.
    ``shared_trunk``: the actor-critic's heads sit on one trunk (else each has its own MLP).
    ``log_std_init``: a continuous actor-critic's initial log standard deviation.
    Left out (specs stored before they existed), both are what such a network had: tanh and
    separate trunks for an MLP, relu and a shared trunk after a CNN.
    """

    obs_shape: tuple[int, ...]
    obs_dtype: str
    action_kind: str
    action_dim: int
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    arch: str = "mlp"
    hidden: tuple[int, ...] = (64, 64)
    normalize_obs: bool = False
    activation: str | None = None
    shared_trunk: bool | None = None
    log_std_init: float = 0.0

    def __post_init__(self) -> None:
        # Specs travel between processes: reject a bad one here, not deep inside a forward pass.
        cnn = self.arch != "mlp"
        if self.activation is None:
            object.__setattr__(self, "activation", "relu" if cnn else "tanh")
        if self.shared_trunk is None:
            object.__setattr__(self, "shared_trunk", cnn)
        for name, value, allowed in (("obs_dtype", self.obs_dtype, _OBS_DTYPES),
                                     ("action_kind", self.action_kind, _ACTION_KINDS),
                                     ("arch", self.arch, tuple(ARCHS.values())),
                                     ("activation", self.activation, tuple(ACTIVATIONS))):
            if value not in allowed:
                raise ValueError(f"PolicySpec.{name} must be one of {allowed}, not {value!r}")
        if cnn and not self.shared_trunk:
            raise ValueError("PolicySpec.shared_trunk: a CNN trunk is shared by both heads")

    @property
    def cnn(self) -> str | None:
        """The model section's name of the CNN (None: an MLP)."""
        return next(cnn for cnn, arch in ARCHS.items() if arch == self.arch)

    @property
    def action_shape(self) -> tuple[int, ...]:
        return () if self.action_kind == "discrete" else (self.action_dim,)

    @property
    def action_dtype(self) -> str:
        return "int64" if self.action_kind == "discrete" else "float32"

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicySpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def policy_spec_for(env_id: str, env: EnvCode | None = None) -> PolicySpec:
    """The default policy for an env: build it to read its (preprocessed) spaces."""
    return policy_spec_from(describe(env_id, env))


def policy_spec_from(description: EnvDescription) -> PolicySpec:
    """The policy's spaces for an env the describe probe found so (no env built), MuJoCo's
    observations normalised; the network is the Config's ``model`` (:func:`with_network`)."""
    return PolicySpec(
        obs_shape=tuple(description.obs_shape),
        obs_dtype=description.obs_dtype,  # float64 envs (MuJoCo) are cast by the rollout
        action_kind=description.action_kind,
        action_dim=description.action_dim,
        action_low=tuple(description.action_low),
        action_high=tuple(description.action_high),
        normalize_obs=description.family == "mujoco",
    )


def with_network(spec: PolicySpec, model: ModelSpec, **fixed: Any) -> PolicySpec:
    """``spec`` with the network a Config's ``model`` section asks for over its observations
    (:func:`faasrl.rl.model_spec.trunk` raises when they cannot take it), and the fields an
    algorithm fixes (``fixed``: the off-policy networks' ``normalize_obs``, ``shared_trunk``)."""
    cnn = trunk(model, spec.obs_shape, spec.obs_dtype)
    log_std_init = getattr(model, "log_std_init", None)
    return replace(spec, **{"arch": ARCHS[cnn],
                            "hidden": tuple(model.hidden), "activation": model.activation,
                            "shared_trunk": getattr(model, "shared_trunk", None),
                            "log_std_init": 0.0 if log_std_init is None else log_std_init,
                            **fixed})


def activation(name: str) -> nn.Module:
    """The activation layer named ``name`` (:data:`faasrl.rl.model_spec.ACTIVATIONS`)."""
    return getattr(nn, ACTIVATIONS[name])()


@torch.no_grad()
def obs_batch_stats(obs: torch.Tensor | np.ndarray, obs_shape: tuple[int, ...]
                    ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(mean, variance, count) of a batch of raw observations, in float64."""
    x = torch.as_tensor(obs).to(torch.float64).reshape(-1, *obs_shape)
    if x.shape[0] == 0:
        return torch.zeros(obs_shape, dtype=torch.float64), \
            torch.ones(obs_shape, dtype=torch.float64), 0
    return x.mean(0), x.var(0, correction=0), x.shape[0]


def _init(layer: nn.Linear | nn.Conv2d, std: float = math.sqrt(2)) -> nn.Module:
    """CleanRL's init: orthogonal weights, zero bias."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def _layers(n_in: int, hidden: tuple[int, ...], act: str) -> list[nn.Module]:
    """Fully connected layers of widths ``hidden``, each followed by activation ``act``."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [_init(nn.Linear(n_in, width)), activation(act)]
        n_in = width
    return layers


def _mlp(n_in: int, hidden: tuple[int, ...], n_out: int, out_std: float, act: str = "tanh"
         ) -> nn.Sequential:
    return nn.Sequential(*_layers(n_in, hidden, act),
                         _init(nn.Linear(hidden[-1] if hidden else n_in, n_out), out_std))


def _nature_cnn(obs_shape: tuple[int, ...], hidden: tuple[int, ...], act: str = "relu"
                ) -> nn.Sequential:
    convs = nn.Sequential(
        _init(nn.Conv2d(obs_shape[0], 32, 8, stride=4)), nn.ReLU(),
        _init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
        _init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        n_in = convs(torch.zeros(1, *obs_shape)).shape[1]
    return nn.Sequential(convs, *_layers(n_in, hidden, act))


def _trunk(spec: PolicySpec) -> nn.Sequential:
    """A shared trunk: the spec's CNN (or a flatten) and its fully connected layers."""
    if spec.arch == "cnn":
        return _nature_cnn(spec.obs_shape, spec.hidden, spec.activation)
    if spec.arch == "impala":
        convs = impala_cnn(spec.obs_shape, _init)
        return nn.Sequential(convs, *_layers(flat_size(convs, spec.obs_shape), spec.hidden,
                                             spec.activation))
    return nn.Sequential(nn.Flatten(),
                         *_layers(math.prod(spec.obs_shape), spec.hidden, spec.activation))


def _sample(dist: Categorical | Normal, generator: torch.Generator | None) -> torch.Tensor:
    """``dist.sample()``, but drawing from ``generator`` (torch's global RNG when None)."""
    if isinstance(dist, Categorical):
        return torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)
    noise = torch.randn(dist.mean.shape, generator=generator, device=dist.mean.device)
    return dist.mean + dist.stddev * noise


class ActorCritic(nn.Module):
    """PPO's actor-critic, CleanRL style.

    The spec's network: separate actor and critic MLPs (CleanRL's, with tanh), or one trunk, an
    MLP or a Nature CNN and its fully connected layers, shared by both heads.
    Discrete actions are Categorical; continuous ones a Normal with a state-independent learnable
    ``log_std``, sampled unclipped (the env clips). Every method takes raw observations (uint8 or
    float) on the model's device; sampling methods take an optional ``generator`` so a rollout's
    randomness can be seeded without touching torch's global RNG.
    """

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__()
        self.spec = spec
        act = spec.activation
        if not spec.shared_trunk:
            n_in = math.prod(spec.obs_shape)
            self.trunk: nn.Module = nn.Flatten()
            self.actor = _mlp(n_in, spec.hidden, spec.action_dim, 0.01, act)
            self.critic = _mlp(n_in, spec.hidden, 1, 1.0, act)
        else:
            self.trunk = _trunk(spec)
            self.actor = _init(nn.Linear(spec.hidden[-1], spec.action_dim), 0.01)
            self.critic = _init(nn.Linear(spec.hidden[-1], 1), 1.0)
        if spec.action_kind == "continuous":
            self.log_std = nn.Parameter(torch.full((spec.action_dim,), spec.log_std_init))
        # Running observation statistics (used only when spec.normalize_obs). float64 so merging
        # millions of samples does not drift; count 0 makes the first merge exact.
        self.register_buffer("obs_mean", torch.zeros(spec.obs_shape, dtype=torch.float64))
        self.register_buffer("obs_var", torch.ones(spec.obs_shape, dtype=torch.float64))
        self.register_buffer("obs_count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update_obs_stats(self, obs: torch.Tensor | np.ndarray) -> None:
        """Merge a batch of raw observations into the running mean/variance (Chan et al.).

        A no-op unless ``spec.normalize_obs``. Call it after the PPO update on that batch, so the
        update sees the same normalisation the behaviour policy used for its log-probs.
        """
        if not self.spec.normalize_obs:
            return
        self.merge_obs_stats(*obs_batch_stats(obs, self.spec.obs_shape))

    @torch.no_grad()
    def merge_obs_stats(self, batch_mean: torch.Tensor, batch_var: torch.Tensor,
                        n: float | torch.Tensor) -> None:
        """Merge another batch's observation mean, variance and count (from
        :func:`obs_batch_stats`): how a parameter function folds in what its learners saw."""
        n = float(n)
        if not self.spec.normalize_obs or n == 0:
            return
        batch_mean = batch_mean.to(self.obs_mean.device, torch.float64)
        batch_var = batch_var.to(self.obs_var.device, torch.float64)
        total = self.obs_count + n
        delta = batch_mean - self.obs_mean
        m2 = self.obs_var * self.obs_count + batch_var * n + delta**2 * self.obs_count * n / total
        self.obs_mean += delta * n / total
        self.obs_var.copy_(m2 / total)
        self.obs_count.copy_(total)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """What the heads see: the normalised or scaled observations through the trunk."""
        if self.spec.normalize_obs:
            x = (obs.to(torch.float64) - self.obs_mean) / torch.sqrt(self.obs_var + OBS_EPS)
            x = x.clamp(-OBS_CLIP, OBS_CLIP).to(torch.float32)
        elif self.spec.arch != "mlp":
            x = obs.to(torch.float32) / PIXEL_SCALE
        else:
            x = obs.to(torch.float32)
        return self.trunk(x)

    def distribution(self, obs: torch.Tensor) -> Categorical | Normal:
        """The action distribution (a Normal per action dimension for continuous actions)."""
        return self._dist(self.actor(self.features(obs)))

    def _dist(self, out: torch.Tensor) -> Categorical | Normal:
        """The distribution of the actor head's output ``out``."""
        if self.spec.action_kind == "discrete":
            return Categorical(logits=out, validate_args=False)
        return Normal(out, self.log_std.exp().expand_as(out), validate_args=False)

    def log_prob(self, out: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Per-sample log-prob of ``action`` under the actor head's output ``out`` (logits, or
        Gaussian means), summed over a continuous action's dimensions. The closed forms of
        Categorical's and Normal's, without building distribution objects: on an update's
        minibatches and a rollout's steps those cost more than the arithmetic."""
        if self.spec.action_kind == "discrete":
            return out.log_softmax(-1).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        z = (action - out) / self.log_std.exp()
        return (-0.5 * z.square() - self.log_std - LOG_SQRT_2PI).sum(-1)

    def entropy(self, out: torch.Tensor) -> torch.Tensor:
        """Per-sample entropy of the action distribution (summed over a continuous action's
        dimensions), from the actor head's output ``out``, as :meth:`log_prob`."""
        if self.spec.action_kind == "discrete":
            log_p = out.log_softmax(-1)
            # As Categorical.entropy: a probability of 0 adds 0, not 0 * -inf.
            return -(log_p.clamp(min=torch.finfo(log_p.dtype).min) * log_p.exp()).sum(-1)
        return (0.5 + LOG_SQRT_2PI + self.log_std).sum().expand(out.shape[0])

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, shape (B,)."""
        return self.critic(self.features(obs)).squeeze(-1)

    def get_action_and_value(
        self,
        obs: torch.Tensor,
        action: torch.Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob (B,), entropy (B,), value (B,)); samples an action when none given.

        Continuous log-probs and entropies are summed over action dimensions.
        """
        features = self.features(obs)
        out = self.actor(features)
        if action is None:
            action = _sample(self._dist(out), generator)
        return action, self.log_prob(out, action), self.entropy(out), \
            self.critic(features).squeeze(-1)

    def act(
        self,
        obs: torch.Tensor,
        deterministic: bool = False,
        *,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Actions only: the mode (argmax / mean) when ``deterministic``, else a sample."""
        out = self.actor(self.features(obs))
        if not deterministic:
            return _sample(self._dist(out), generator)
        return out.argmax(-1) if self.spec.action_kind == "discrete" else out
