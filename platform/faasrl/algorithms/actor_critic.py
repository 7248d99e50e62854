"""What PPO and IMPACT share: the actor-critic their ``model`` section asks for, its optimizer,
and the networks each env family gets when a job names none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:  # functions train with torch; the gateway (no torch) only validates Config
    import torch

    from faasrl.rl.policy import ActorCritic, with_network
except ModuleNotFoundError:
    torch = ActorCritic = with_network = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from faasrl.rl.policy import PolicySpec

# The ``model`` a job of each env family takes (ActorCriticModelSpec's defaults elsewhere):
# CleanRL's MuJoCo MLPs, and the Nature CNN's 512-wide ReLU layer for Atari.
FAMILY_MODELS: dict[str, dict[str, Any]] = {
    "mujoco": {"hidden": [256, 256]},
    "atari": {"hidden": [512], "activation": "relu"},
}


def make_model(spec: PolicySpec, cfg: Any) -> ActorCritic:
    """The actor-critic of ``cfg.model`` over ``spec``'s observations (normalised when the
    spec says so: MuJoCo)."""
    return ActorCritic(with_network(spec, cfg.model))


def make_optimizer(model: ActorCritic, cfg: Any) -> torch.optim.Optimizer:
    """Adam with ``cfg.adam_eps``, fused: one kernel for all parameters (on the CPU the
    per-tensor loop cost ~15 % of an update)."""
    return torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps,
                            fused=True)
