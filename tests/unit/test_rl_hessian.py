"""The learner's measurements for controllers: Lanczos extremes, the surrogate's Hessian, the KL
between consecutive policies and the gradient noise scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal

from faasrl.algorithms import ppo
from faasrl.rl.diagnostics import action_distributions, gradient_noise_scale, mean_policy_kl
from faasrl.rl.hessian import lanczos_extremes, surrogate_hessian_extremes, surrogate_objective
from faasrl.rl.policy import ActorCritic, PolicySpec

CARTPOLE = PolicySpec((4,), "float32", "discrete", 2, hidden=(8, 8))
PENDULUM = PolicySpec((3,), "float32", "continuous", 2, (-1.0, -1.0), (1.0, 1.0), hidden=(8,))


def test_lanczos_finds_both_ends_of_a_known_spectrum():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    eigenvalues = np.linspace(-3.0, 5.0, 40)
    a = torch.tensor(q @ np.diag(eigenvalues) @ q.T)
    lo, hi, steps = lanczos_extremes(lambda v: a @ v, 40, 25,
                                     generator=torch.Generator().manual_seed(0))
    assert (lo, hi) == (pytest.approx(-3.0, abs=1e-6), pytest.approx(5.0, abs=1e-6))
    assert steps == 25
    # an operator with 2 distinct eigenvalues: the Krylov space closes after 2 steps
    diag = torch.tensor([2.0] * 10 + [-1.0] * 10, dtype=torch.float64)
    lo, hi, steps = lanczos_extremes(lambda v: diag * v, 20, 10,
                                     generator=torch.Generator().manual_seed(1))
    assert (lo, hi, steps) == (pytest.approx(-1.0), pytest.approx(2.0), 2)


def batch_for(spec: PolicySpec, n: int = 64) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(n, *spec.obs_shape, generator=g)
    actions = torch.randint(0, spec.action_dim, (n,), generator=g) \
        if spec.action_kind == "discrete" else torch.randn(n, spec.action_dim, generator=g)
    return {"obs": obs, "actions": actions, "advantages": torch.randn(n, generator=g),
            "logprobs": torch.zeros(n), "values": torch.zeros(n), "returns": torch.randn(n)}


@pytest.mark.parametrize("spec", [CARTPOLE, PENDULUM])
def test_surrogate_hessian_extremes_match_the_exact_hessian(spec):
    torch.manual_seed(0)
    model = ActorCritic(spec)
    batch = batch_for(spec)
    out = surrogate_hessian_extremes(model, batch, samples=64, iterations=200,
                                     generator=torch.Generator().manual_seed(0))
    # the exact Hessian over the parameters the objective uses (the actor; not the critic)
    names = [n for n, _ in model.named_parameters() if not n.startswith("critic")]
    params = dict(model.named_parameters())
    flat = torch.cat([params[n].detach().reshape(-1) for n in names])

    def objective(x: torch.Tensor) -> torch.Tensor:
        overrides, i = {}, 0
        for n in names:
            overrides[n] = x[i:i + params[n].numel()].reshape(params[n].shape)
            i += params[n].numel()
        return _objective_with(model, overrides, batch)

    hessian = torch.autograd.functional.hessian(objective, flat)
    exact = np.linalg.eigvalsh(hessian.double().numpy())
    assert out["lambda_min"] == pytest.approx(exact[0], rel=1e-3, abs=1e-6)
    assert out["lambda_max"] == pytest.approx(exact[-1], rel=1e-3, abs=1e-6)
    assert out["samples"] == 64 and out["seconds"] > 0


def _objective_with(model: ActorCritic, overrides: dict[str, torch.Tensor],
                    batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The surrogate with some parameters replaced (so autograd can differentiate in them)."""
    from torch.func import functional_call

    class Surrogate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, obs, actions, adv):
            return surrogate_objective(self.model, obs, actions, adv)

    state = {f"model.{k}": v for k, v in overrides.items()}
    return functional_call(Surrogate(), state, (batch["obs"], batch["actions"],
                                                batch["advantages"]), strict=False)


def test_policy_kl_closed_forms():
    p, q = torch.tensor([[0.5, 0.5]]), torch.tensor([[0.9, 0.1]])
    kl = mean_policy_kl([Categorical(probs=p)], [Categorical(probs=q)])
    # KL(p||q) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1)
    assert kl == pytest.approx(0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(5.0))
    new = Normal(torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 2.0]]))
    old = Normal(torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0]]))
    # per dimension ln(s_o/s_n) + (s_n^2 + (m_n - m_o)^2) / (2 s_o^2) - 1/2, summed
    want = (0 + (1 + 1) / 2 - 0.5) + (np.log(0.5) + 4 / 2 - 0.5)
    assert mean_policy_kl([new], [old]) == pytest.approx(want)
    torch.manual_seed(0)
    model = ActorCritic(CARTPOLE)
    obs = torch.randn(10, 4)
    assert mean_policy_kl(action_distributions(model, obs),
                          action_distributions(model, obs)) == pytest.approx(0.0, abs=1e-7)


def test_gradient_noise_scale_is_zero_without_noise():
    torch.manual_seed(0)
    model = ActorCritic(PENDULUM)
    one = batch_for(PENDULUM, 1)
    same = {k: v.repeat(8, *[1] * (v.dim() - 1)) for k, v in one.items()}  # 8 equal rows
    cfg = ppo.Config(norm_adv=False)

    def loss(batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return ppo.loss(model, batch, cfg)[0]

    out = gradient_noise_scale(model, same, loss, parts=4, generator=torch.Generator())
    assert out["trace"] == pytest.approx(0.0, abs=1e-8) and out["grad_sq"] > 0
    assert out["gns"] == pytest.approx(0.0, abs=1e-6)
    assert (out["batch_small"], out["batch_big"]) == (2, 8)
    noisy = gradient_noise_scale(model, batch_for(PENDULUM, 64), loss, parts=4,
                                 generator=torch.Generator().manual_seed(0))
    assert noisy["trace"] > 0
    with pytest.raises(ValueError, match="parts"):
        gradient_noise_scale(model, one, loss, parts=4, generator=torch.Generator())
