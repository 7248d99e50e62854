"""SAC (Haarnoja et al., with the automatic temperature of their second paper) for continuous
actions: actors sample a tanh-squashed Gaussian policy and ship 1-step transitions to a uniform
replay buffer; the learner steps the twin soft-Q critics, the actor and the temperature, then
Polyak-averages the target critics.

The model (:class:`SoftActorCritic`) holds all of them, so one published version is all an
actor needs, its transitions' priorities included. Until its first gradient step it acts
uniformly at random in the action box, as CleanRL and SB3 do for their first
``learning_starts`` steps: an untrained Gaussian would only explore a narrow band around its
initial mean.

Actions live in two units: the env's box [low, high], which actors and the replay buffer see,
and the unit box [-1, 1]^d the tanh produces, in which the critics take actions and the entropy
is measured, so the target entropy -d means the same for every action scale.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from faasrl import round_row as rr
from faasrl.algorithms.offpolicy import ReplayConfig
from faasrl.rl.model_spec import MLPModelSpec

try:  # functions train with torch; the gateway (no torch) only validates Config
    import torch
    from torch import nn
    from torch.nn import functional

    from faasrl.rl.policy import LOG_SQRT_2PI, activation, with_network
except ModuleNotFoundError:
    torch = nn = functional = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from faasrl.rl.policy import PolicySpec

NAME = "sac"
EXECUTIONS = ("offpolicy",)
ACTION_KINDS = ("continuous",)


class SACConfig(ReplayConfig):
    """SAC's hyper-parameters: CleanRL's and SB3's defaults, with a replay memory the buffer
    function can hold."""

    algorithm: Literal["sac"] = "sac"
    learning_rate: float = Field(3e-4, gt=0, le=1,
                                 description="step size of the critics and the temperature")
    policy_learning_rate: float = Field(3e-4, gt=0, le=1, description="the actor's step size")
    n_step: int = Field(1, ge=1, le=100, description="steps summed into one transition")
    batch_size: int = Field(256, ge=1, le=65_536)
    memory_size: int = Field(200_000, ge=1, le=10_000_000,
                             description="transitions the buffer function holds")
    learning_starts: int = Field(5_000, ge=1, description="transitions before learning (actors "
                                                          "act uniformly until the first update)")
    updates_per_step: float = Field(1.0, gt=0, le=64,
                                    description="gradient steps per env step (replay ratio): "
                                                "actors and learner wait to keep it")
    alpha: float = Field(0.0, ge=0, le=1,
                         description="prioritization; 0 = uniform replay, SAC's own")
    model: MLPModelSpec = Field(default_factory=MLPModelSpec,
                                description="the hidden layers of the actor and each critic")
    adam_eps: float = Field(1e-8, gt=0, le=1, description="Adam's ε (torch's default)")
    tau: float = Field(0.005, gt=0, le=1, description="Polyak step of the target critics")
    entropy_coef: float = Field(1.0, gt=0, description="the temperature α weighing the entropy "
                                                       "(its initial value with autotune)")
    autotune: bool = Field(True, description="tune α so that the policy's entropy tracks -d "
                                             "(d: the action's dimensions)")


Config = SACConfig  # the name the platform looks an algorithm's hyper-parameters up by


# Pendulum's (rl-zoo's step size): past -200 by 6k env steps in a one-seed, one-process check
# at one update per step; MuJoCo's are rl-zoo's.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "classic": {"hyperparameters": {"learning_rate": 1e-3, "policy_learning_rate": 1e-3,
                                    "memory_size": 100_000, "learning_starts": 1_000},
                "envs_per_actor": 1, "steps_per_actor": 64},
    "mujoco": {"hyperparameters": {"learning_starts": 10_000},
               "envs_per_actor": 1, "steps_per_actor": 256},
}
# No Atari env has continuous actions (a job there is refused); the entry keeps the table whole.
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["atari"] = FAMILY_DEFAULTS["classic"]

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # keeps the Gaussian from collapsing or going flat


def _mlp(n_in: int, spec: PolicySpec, n_out: int) -> nn.Sequential:
    """The spec's hidden layers, each followed by its activation, then a linear output."""
    layers: list[nn.Module] = []
    for width in spec.hidden:
        layers += [nn.Linear(n_in, width), activation(spec.activation)]
        n_in = width
    return nn.Sequential(*layers, nn.Linear(n_in, n_out))


class QNetwork(nn.Module if nn is not None else object):  # type: ignore[misc]
    """Q(s, a) for an action in the unit box, shape (B,)."""

    def __init__(self, obs_size: int, action_dim: int, spec: PolicySpec):
        super().__init__()
        self.net = _mlp(obs_size + action_dim, spec, 1)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs.flatten(1).float(), actions], dim=1)).squeeze(1)


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """(y = tanh(u) with u = mean + std·noise, log p(y) summed over the action's dimensions).

    By the change of variables, log p(y) = log N(u; mean, std) - Σ log(1 - tanh²u); the last
    term is written 2(log 2 - u - softplus(-2u)), which stays finite where tanh saturates
    (1 - tanh²u rounds to 0 in float32 from |u| ≈ 9 on).
    """
    u = mean + log_std.exp() * noise
    log_normal = -0.5 * noise ** 2 - log_std - LOG_SQRT_2PI
    log_jacobian = 2 * (math.log(2) - u - functional.softplus(-2 * u))
    return torch.tanh(u), (log_normal - log_jacobian).sum(-1)


class SoftActorCritic(nn.Module if nn is not None else object):  # type: ignore[misc]
    """Everything SAC trains, target critics included, published as one ``state_dict``.

    Observations are flattened float vectors (no normalisation: SAC learns MuJoCo without it).
    ``updates`` counts gradient steps, so actors know an untrained model when they load one.
    ``spec`` says the networks (:func:`make_model` fills it from ``cfg.model``).
    """

    def __init__(self, spec: PolicySpec, cfg: Config):
        super().__init__()
        self.spec = spec
        low = torch.tensor(spec.action_low, dtype=torch.float32)
        high = torch.tensor(spec.action_high, dtype=torch.float32)
        if spec.action_kind != "continuous" or not (low.isfinite().all() and
                                                    high.isfinite().all()):
            raise ValueError("SAC squashes actions into a box: it needs continuous actions "
                             "with finite bounds")
        obs_size, dims = math.prod(spec.obs_shape), spec.action_dim
        self.actor = _mlp(obs_size, spec, 2 * dims)  # a mean and a log-std per dimension
        self.q1 = QNetwork(obs_size, dims, spec)
        self.q2 = QNetwork(obs_size, dims, spec)
        self.q1_target = copy.deepcopy(self.q1).requires_grad_(False)
        self.q2_target = copy.deepcopy(self.q2).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.entropy_coef)))
        self.target_entropy = -float(dims)
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_bias", (high + low) / 2)
        self.register_buffer("updates", torch.zeros((), dtype=torch.int64))

    def _mean_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs.flatten(1).float()).chunk(2, dim=1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions in the unit box, their log-densities (B,)), differentiable in the actor."""
        mean, log_std = self._mean_log_std(obs)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        return squashed_gaussian(mean, log_std, noise)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """tanh(mean): the deterministic action evaluation takes, in the unit box."""
        return torch.tanh(self._mean_log_std(obs)[0])

    def to_env(self, unit: torch.Tensor) -> torch.Tensor:
        return self.action_bias + self.action_scale * unit

    def to_unit(self, actions: torch.Tensor) -> torch.Tensor:
        return (actions - self.action_bias) / self.action_scale


class Optimizers:
    """The actor's, the critics' and the temperature's Adam, checkpointed as one."""

    def __init__(self, model: SoftActorCritic, cfg: Config):
        self.actor = torch.optim.Adam(model.actor.parameters(), lr=cfg.policy_learning_rate,
                                      eps=cfg.adam_eps)
        self.critic = torch.optim.Adam([*model.q1.parameters(), *model.q2.parameters()],
                                       lr=cfg.learning_rate, eps=cfg.adam_eps)
        self.alpha = torch.optim.Adam([model.log_alpha], lr=cfg.learning_rate, eps=cfg.adam_eps)

    def state_dict(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "alpha": self.alpha.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.alpha.load_state_dict(state["alpha"])


def make_model(spec: PolicySpec, cfg: Config) -> SoftActorCritic:
    """The networks of ``cfg.model`` over ``spec``'s flattened observations, one each for the
    actor and the critics (no normalisation)."""
    return SoftActorCritic(with_network(spec, cfg.model, normalize_obs=False,
                                        shared_trunk=False), cfg)


def make_optimizer(model: SoftActorCritic, cfg: Config) -> Optimizers:
    return Optimizers(model, cfg)


def initial_state(cfg: Config) -> dict[str, Any]:
    return {"learner_steps": 0}


def greedy_slot(actors: int) -> int | None:
    """Every actor samples the same policy, so every actor's episodes count."""
    return None


def act(model: SoftActorCritic, obs: torch.Tensor, cfg: Config, *, slot: int, actors: int,
        generator: torch.Generator | None, explore: bool = True) -> torch.Tensor:
    """Actions in env units, (envs, d) float32: a policy sample (uniform in the box until the
    model's first update), or tanh(mean) when not exploring; ``slot`` and ``actors`` do not
    matter: every actor explores alike."""
    with torch.no_grad():
        if not explore:
            unit = model.mode(obs)
        elif int(model.updates) == 0:
            shape = (len(obs), model.action_scale.numel())
            unit = 2 * torch.rand(shape, generator=generator, device=obs.device) - 1
        else:
            unit = model.sample(obs, generator)[0]
        return model.to_env(unit)


def soft_q_targets(model: SoftActorCritic, next_obs: torch.Tensor, returns: torch.Tensor,
                   discounts: torch.Tensor) -> torch.Tensor:
    """y = R + γ^m · (min_i Q_target_i(s', a') - α log π(a'|s')) with a' ~ π(·|s'); a discount
    of 0 (the episode ended) leaves R alone."""
    with torch.no_grad():
        actions, log_probs = model.sample(next_obs)
        q = torch.min(model.q1_target(next_obs, actions), model.q2_target(next_obs, actions))
        return returns + discounts * (q - model.log_alpha.exp() * log_probs)


def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """Polyak averaging: target ← target + τ (online - target)."""
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters(), strict=True):
            t.lerp_(o, tau)


def priorities(model: SoftActorCritic, batch: dict[str, torch.Tensor], cfg: Config
               ) -> torch.Tensor:
    """|y - Q1(s, a)| of an actor's new transitions: SAC replays uniformly, but the buffer keeps
    a priority per transition, and a real one lets a job turn prioritization on."""
    targets = soft_q_targets(model, batch["next_obs"], batch["returns"], batch["discounts"])
    with torch.no_grad():
        q = model.q1(batch["obs"], model.to_unit(batch["actions"]))
    return (targets - q).abs()


def train(model: SoftActorCritic, optimizer: Optimizers, batches: list[dict[str, torch.Tensor]],
          cfg: Config, state: dict[str, Any]
          ) -> tuple[dict[str, float], dict[str, Any], torch.Tensor]:
    """A gradient step per batch: the critics toward the soft target (each squared error
    weighted by its importance weight), the actor toward min_i Q_i - α log π with the critics
    just updated, α toward the target entropy, then the target critics by Polyak averaging.
    Stats are means over the steps; the new priorities are the critics' |y - Q1| before their
    step, as :func:`priorities` computes them."""
    stats: dict[str, list[torch.Tensor]] = {k: [] for k in ("q_loss", "actor_loss", rr.ALPHA,
                                                            "entropy", "q_mean")}
    errors = []
    for batch in batches:
        obs = batch["obs"]
        targets = soft_q_targets(model, batch["next_obs"], batch["returns"], batch["discounts"])
        actions = model.to_unit(batch["actions"])
        q1, q2 = model.q1(obs, actions), model.q2(obs, actions)
        q_loss = (batch["weights"] * ((q1 - targets) ** 2 + (q2 - targets) ** 2)).mean()
        optimizer.critic.zero_grad()
        q_loss.backward()
        optimizer.critic.step()

        alpha = model.log_alpha.exp().detach()
        new_actions, log_probs = model.sample(obs)
        q_new = torch.min(model.q1(obs, new_actions), model.q2(obs, new_actions))
        actor_loss = (alpha * log_probs - q_new).mean()
        optimizer.actor.zero_grad()
        actor_loss.backward()
        optimizer.actor.step()

        if cfg.autotune:  # entropy -log π below the target makes the loss's slope negative: α grows
            alpha_loss = -(model.log_alpha * (log_probs.detach() + model.target_entropy)).mean()
            optimizer.alpha.zero_grad()
            alpha_loss.backward()
            optimizer.alpha.step()

        soft_update(model.q1_target, model.q1, cfg.tau)
        soft_update(model.q2_target, model.q2, cfg.tau)
        model.updates += 1
        for key, value in (("q_loss", q_loss), ("actor_loss", actor_loss), (rr.ALPHA, alpha),
                           ("entropy", -log_probs.mean()), ("q_mean", q1.mean())):
            stats[key].append(value.detach())
        errors.append((targets - q1).detach().abs())
    means = {k: torch.stack(v).mean().item() for k, v in stats.items()}
    return means, {"learner_steps": int(state["learner_steps"]) + len(batches)}, torch.cat(errors)
