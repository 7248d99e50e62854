"""The learner's measurements for controllers: Lanczos extremes, the surrogate's Hessian (its
R-operator products against autograd's double backward and the exact Hessian), the KL between
consecutive policies and the gradient noise scale."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import torch
from helpers import REPO
from torch.distributions import Categorical, Normal

from faasrl.algorithms import ppo
from faasrl.rl.diagnostics import action_distributions, gradient_noise_scale, mean_policy_kl
from faasrl.rl.hessian import lanczos_extremes, surrogate_hessian_extremes, surrogate_hvp
from faasrl.rl.policy import ActorCritic, PolicySpec

_spec = importlib.util.spec_from_file_location("bench_nitro_overhead",
                                               REPO / "bench" / "nitro_overhead.py")
nitro_overhead = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = nitro_overhead
_spec.loader.exec_module(nitro_overhead)

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


def _surrogate(model: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
               advantages: torch.Tensor) -> torch.Tensor:
    """Nitro's L(θ) = mean_t log π_θ(a_t|s_t) · A_t, by the model's own distribution."""
    logprob = model.distribution(obs).log_prob(actions)
    return ((logprob.sum(-1) if logprob.dim() > 1 else logprob) * advantages).mean()


def _autograd_hvp(model: ActorCritic, batch: dict[str, torch.Tensor]):
    """The reference product, the one bench/nitro_overhead.py times against: autograd's double
    backward on a retained graph (Pearlmutter)."""
    return nitro_overhead.autograd_hvp(model, batch["obs"], batch["actions"], batch["advantages"])


def _new_hvp(model: ActorCritic, batch: dict[str, torch.Tensor]):
    return surrogate_hvp(model, batch["obs"], batch["actions"], batch["advantages"])


CARTPOLE_64 = PolicySpec((4,), "float32", "discrete", 2, hidden=(64, 64))
HOPPER_LIKE = PolicySpec((5,), "float32", "continuous", 3, (-1.0,) * 3, (1.0,) * 3,
                         hidden=(16, 16), normalize_obs=True)
ATARI_LIKE = PolicySpec((2, 36, 36), "uint8", "discrete", 4, arch="cnn", hidden=(16,))
# Networks from a model section: other activations (f'' by autograd), a shared MLP trunk.
ELU_SHARED = PolicySpec((4,), "float32", "discrete", 3, hidden=(32, 16), activation="elu",
                        shared_trunk=True)
GELU = PolicySpec((4,), "float32", "discrete", 2, hidden=(16, 8), activation="gelu")
SILU_CONTINUOUS = PolicySpec((5,), "float32", "continuous", 2, (-1.0,) * 2, (1.0,) * 2,
                             hidden=(16,), activation="silu")
LEAKY = PolicySpec((4,), "float32", "discrete", 2, hidden=(16,), activation="leaky_relu")


def _model_and_batch(spec: PolicySpec, n: int) -> tuple[ActorCritic, dict[str, torch.Tensor]]:
    """A seeded model (log_std and observation statistics off their initial values) and batch."""
    torch.manual_seed(0)
    model = ActorCritic(spec)
    batch = batch_for(spec, n)
    if spec.obs_dtype == "uint8":
        batch["obs"] = torch.randint(0, 256, batch["obs"].shape, dtype=torch.uint8,
                                     generator=torch.Generator().manual_seed(1))
    if spec.action_kind == "continuous":
        with torch.no_grad():
            model.log_std.copy_(torch.linspace(-0.5, 0.3, spec.action_dim))
    model.update_obs_stats(2 * batch["obs"] + 1)
    return model, batch


@pytest.mark.parametrize("spec", [CARTPOLE_64, PENDULUM, HOPPER_LIKE, ATARI_LIKE, ELU_SHARED,
                                  GELU, SILU_CONTINUOUS, LEAKY],
                         ids=["cartpole", "pendulum", "normalized-obs", "cnn", "elu-shared",
                              "gelu", "silu-continuous", "leaky-relu"])
def test_surrogate_hvp_equals_autograds_double_backward(spec):
    model, batch = _model_and_batch(spec, 48)
    (ref, dim), (new, new_dim) = _autograd_hvp(model, batch), _new_hvp(model, batch)
    assert new_dim == dim
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        v = torch.randn(dim, dtype=torch.float64, generator=g)
        want = ref(v)
        torch.testing.assert_close(new(v), want, rtol=1e-4, atol=1e-5 * want.abs().max().item())


@pytest.mark.parametrize("spec", [CARTPOLE_64, HOPPER_LIKE], ids=["cartpole", "continuous"])
def test_surrogate_hessian_extremes_equal_the_autograd_implementation(spec):
    """Same subset, same start vector: the Ritz values of the reference's products."""
    model, batch = _model_and_batch(spec, 512)
    out = surrogate_hessian_extremes(model, batch, samples=256, iterations=20,
                                     generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    idx = torch.randperm(512, generator=g)[:256]
    ref, dim = _autograd_hvp(model, {k: v[idx] for k, v in batch.items()})
    lo, hi, steps = lanczos_extremes(ref, dim, 20, generator=g)
    assert (out["lambda_min"], out["lambda_max"], out["iterations"]) == (
        pytest.approx(lo, rel=1e-5), pytest.approx(hi, rel=1e-5), steps)
    assert out["samples"] == 256


@pytest.mark.parametrize("spec", [CARTPOLE, PENDULUM])
def test_surrogate_hvp_and_extremes_match_the_exact_hessian(spec):
    torch.manual_seed(0)
    model = ActorCritic(spec)
    batch = batch_for(spec)
    # the exact Hessian over the parameters the objective uses (not the critic), in order
    names = [n for n, _ in model.named_parameters() if not n.startswith("critic")]
    params = dict(model.named_parameters())
    flat = torch.cat([params[n].detach().reshape(-1) for n in names])

    def objective(x: torch.Tensor) -> torch.Tensor:
        overrides, i = {}, 0
        for n in names:
            overrides[n] = x[i:i + params[n].numel()].reshape(params[n].shape)
            i += params[n].numel()
        return _objective_with(model, overrides, batch)

    hessian = torch.autograd.functional.hessian(objective, flat).double()
    hvp, dim = _new_hvp(model, batch)
    v = torch.randn(dim, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    want = hessian @ v
    torch.testing.assert_close(hvp(v).double(), want, rtol=1e-4,
                               atol=1e-5 * want.abs().max().item())
    out = surrogate_hessian_extremes(model, batch, samples=64, iterations=200,
                                     generator=torch.Generator().manual_seed(0))
    exact = np.linalg.eigvalsh(hessian.numpy())
    assert out["lambda_min"] == pytest.approx(exact[0], rel=1e-3, abs=1e-6)
    assert out["lambda_max"] == pytest.approx(exact[-1], rel=1e-3, abs=1e-6)
    assert out["samples"] == 64 and out["seconds"] > 0


def test_surrogate_hvp_refuses_a_layer_it_cannot_differentiate():
    model = ActorCritic(CARTPOLE)
    model.actor[1] = torch.nn.Softplus()
    with pytest.raises(TypeError, match="Softplus"):
        _new_hvp(model, batch_for(CARTPOLE))


def _objective_with(model: ActorCritic, overrides: dict[str, torch.Tensor],
                    batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The surrogate with some parameters replaced (so autograd can differentiate in them)."""
    from torch.func import functional_call

    class Surrogate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, obs, actions, adv):
            return _surrogate(self.model, obs, actions, adv)

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
