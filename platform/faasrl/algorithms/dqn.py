"""DQN as the long-haul paper and Ape-X run it: dueling network, double-DQN n-step targets, Huber
loss on prioritized batches, ε-greedy actors with one ε each that compute their transitions'
initial priorities at the edge.

The model (:class:`QLearner`) holds the online and the target network, so one published
version gives an actor both: it needs the target net for its transitions' TD errors. Actors
build the n-step transitions (:mod:`faasrl.rl.explore`); the buffer function stores and samples
them (:mod:`faasrl.rl.replay`); the learner runs ``publish_every`` gradient steps per invocation
(:func:`train`) and syncs the target network every ``target_update`` steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from faasrl import round_row as rr
from faasrl.algorithms.offpolicy import ReplayConfig
from faasrl.rl.model_spec import ModelSpec

try:  # functions train with torch; the gateway (no torch) only validates Config
    import torch
    from torch import nn
    from torch.nn import functional

    from faasrl.rl.policy import with_network
    from faasrl.rl.qnetwork import DuelingQNetwork
except ModuleNotFoundError:
    torch = nn = functional = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from faasrl.rl.policy import PolicySpec

NAME = "dqn"
EXECUTIONS = ("offpolicy",)
ACTION_KINDS = ("discrete",)


class DQNConfig(ReplayConfig):
    """DQN's hyper-parameters (Ape-X's and the long-haul paper's where they give them)."""

    algorithm: Literal["dqn"] = "dqn"
    model: ModelSpec = Field(default_factory=ModelSpec,
                             description="the dueling network's trunk (the value and advantage "
                                         "streams are one linear layer each on it)")
    adam_eps: float = Field(1.5e-4, gt=0, le=1, description="Adam's ε (Ape-X's)")
    target_update: int = Field(2_500, ge=1, description="gradient steps between target syncs")
    max_grad_norm: float = Field(40.0, gt=0)
    epsilon: float = Field(0.4, gt=0, le=1, description="Ape-X's base ε")
    epsilon_alpha: float = Field(7.0, ge=0, description="Ape-X's ε spread across actors")


Config = DQNConfig  # the name the platform looks an algorithm's hyper-parameters up by


FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    # lr 2.5e-4 and a target synced every 500 steps held 500 on CartPole where lr 5e-4 and
    # 250 peaked near 470 and fell back to ~300, and SB3-zoo's 2.3e-3 with a target synced
    # every few steps diverged (one seed each, 50k env steps).
    "classic": {"hyperparameters": {"learning_rate": 2.5e-4, "batch_size": 64,
                                    "memory_size": 50_000, "learning_starts": 1_000,
                                    "target_update": 500, "publish_every": 8,
                                    "updates_per_step": 0.5, "beta_steps": 20_000},
                "envs_per_actor": 1, "steps_per_actor": 64},
    # The long-haul paper's memory of 65,536 (ReplayConfig's default): each distinct frame is
    # held once (rl/frames.py), about 0.5 GB where whole stacks would take 3.7 GB.
    "atari": {"hyperparameters": {"learning_rate": 1e-4, "model": {"hidden": [512]},
                                  "learning_starts": 5_000},
              "envs_per_actor": 1, "steps_per_actor": 256},
}
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["mujoco"] = FAMILY_DEFAULTS["classic"]


class QLearner(nn.Module if nn is not None else object):  # type: ignore[misc]
    """The online network and its target, published together; ``spec`` says their network."""

    def __init__(self, spec: PolicySpec):
        super().__init__()
        self.spec = spec
        self.online = DuelingQNetwork(spec)
        self.target = DuelingQNetwork(spec)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)


def make_model(spec: PolicySpec, cfg: Config) -> QLearner:
    """The network of ``cfg.model`` over ``spec``'s observations (no normalisation: frames are
    scaled, vectors taken as they are; the dueling streams share the trunk)."""
    return QLearner(with_network(spec, cfg.model, normalize_obs=False, shared_trunk=True))


def make_optimizer(model: QLearner, cfg: Config) -> torch.optim.Optimizer:
    """Adam over the online net, torch's fused implementation: one pass over each parameter
    for the whole update, where the default on a CPU runs seven tensor ops per parameter
    from a Python loop (a sixth of a gradient step on CartPole's MLP). The same Adam; its
    rounding differs from the loop's in the last bits."""
    return torch.optim.Adam(model.online.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps,
                            fused=True)


def initial_state(cfg: Config) -> dict[str, Any]:
    return {"learner_steps": 0}


def greedy_slot(actors: int) -> int | None:
    """The last actor explores least (ε^(1+α)); with one actor, its ε is the base 0.4."""
    return actors - 1 if actors > 1 else None


def actor_epsilon(i: int, actors: int, cfg: Config) -> float:
    """Ape-X: actor i of N explores with ε^(1 + α·i/(N-1))."""
    spread = i / (actors - 1) if actors > 1 else 0.0
    return cfg.epsilon ** (1 + cfg.epsilon_alpha * spread)


def act(model: QLearner, obs: torch.Tensor, cfg: Config, *, slot: int, actors: int,
        generator: torch.Generator | None, explore: bool = True) -> torch.Tensor:
    """ε-greedy with the actor's own ε (greedy when not exploring)."""
    with torch.no_grad():
        greedy = model.online(obs).argmax(dim=1)
    if not explore:
        return greedy
    n, actions = len(obs), model.online.advantage.out_features
    random = torch.randint(actions, (n,), generator=generator)
    explores = torch.rand(n, generator=generator) < actor_epsilon(slot, actors, cfg)
    return torch.where(explores, random, greedy)


def double_dqn_targets(online: nn.Module, target: nn.Module, next_obs: torch.Tensor,
                       returns: torch.Tensor, discounts: torch.Tensor) -> torch.Tensor:
    """y = R + γ^m · Q_target(s_{t+m}, argmax_a Q_online(s_{t+m}, a)); a discount of 0 (the
    episode ended) leaves R alone."""
    with torch.no_grad():
        return _bootstrapped(online, target(next_obs), next_obs, returns, discounts)


def _bootstrapped(online: nn.Module, target_q: torch.Tensor, next_obs: torch.Tensor,
                  returns: torch.Tensor, discounts: torch.Tensor) -> torch.Tensor:
    """:func:`double_dqn_targets` from the target net's Q(s_{t+m}, ·), ``target_q``."""
    with torch.no_grad():
        best = online(next_obs).argmax(dim=1, keepdim=True)
        return returns + discounts * target_q.gather(1, best).squeeze(1)


def _target_values(target: nn.Module, batches: list[dict[str, torch.Tensor]]
                   ) -> list[torch.Tensor]:
    """The target net's Q(s_{t+m}, ·) of each batch, in one forward pass over them all: the
    same rows through the same weights, with one call's overhead instead of one per batch."""
    with torch.no_grad():
        q = target(torch.cat([b["next_obs"] for b in batches]))
    return list(q.split([len(b["next_obs"]) for b in batches]))


def td_loss(online: nn.Module, obs: torch.Tensor, actions: torch.Tensor,
            targets: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the IS-weighted mean Huber loss, |δ| per transition: the new priorities)."""
    q = online(obs).gather(1, actions.long().unsqueeze(1)).squeeze(1)
    errors = targets - q
    loss = (weights * functional.huber_loss(q, targets, reduction="none")).mean()
    return loss, errors.detach().abs()


def priorities(model: QLearner, batch: dict[str, torch.Tensor], cfg: Config) -> torch.Tensor:
    """The actor's |δ| for its new transitions, with its copies of both networks."""
    targets = double_dqn_targets(model.online, model.target, batch["next_obs"],
                                 batch["returns"], batch["discounts"])
    with torch.no_grad():
        q = model.online(batch["obs"]).gather(1, batch["actions"].long().unsqueeze(1))
    return (targets - q.squeeze(1)).abs()


def train(model: QLearner, optimizer: torch.optim.Optimizer,
          batches: list[dict[str, torch.Tensor]], cfg: Config, state: dict[str, Any]
          ) -> tuple[dict[str, float], dict[str, Any], torch.Tensor]:
    """A gradient step per batch; the target net syncs every ``target_update`` steps. The
    target net holds still between syncs, so its values for all the batches before the next
    one come from one forward pass; the stats stay tensors until the last step (one read back
    per call, not two per step)."""
    steps = int(state["learner_steps"])
    params = list(model.online.parameters())
    losses, targets_mean, new = [], [], []
    target_q: list[torch.Tensor] = []
    for i, batch in enumerate(batches):
        if not target_q:  # the batches up to and including the next sync's step
            target_q = _target_values(
                model.target, batches[i:i + cfg.target_update - steps % cfg.target_update])
        targets = _bootstrapped(model.online, target_q.pop(0), batch["next_obs"],
                                batch["returns"], batch["discounts"])
        loss, errors = td_loss(model.online, batch["obs"], batch["actions"], targets,
                               batch["weights"])
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
        optimizer.step()
        steps += 1
        if steps % cfg.target_update == 0:
            model.target.load_state_dict(model.online.state_dict())
        losses.append(loss.detach())
        targets_mean.append(targets.mean())
        new.append(errors)
    stats = {rr.LOSS: torch.stack(losses).double().mean().item(),
             "target_mean": torch.stack(targets_mean).double().mean().item()}
    return stats, {"learner_steps": steps}, torch.cat(new)
