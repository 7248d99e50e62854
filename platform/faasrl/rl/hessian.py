"""The extreme Hessian eigenvalues of PPO's surrogate objective, for Nitro's boosting score.

Nitro measures the curvature of L(θ) = E_t[log π_θ(a_t|s_t) · A_t] around the freshly updated
policy: R = -λ_max/λ_min of H = ∇²_θ L. Forming H is out of the question (θ has 10^4-10^6
entries), so λ_min and λ_max come from a Lanczos iteration that only needs Hessian-vector
products, which autograd gives at the price of one extra backward pass each (Pearlmutter's
trick: Hv = ∇_θ(∇_θL · v)).

Why not PyHessian (which Nitro used): its Lanczos (``density``) calls ``torch.eig``, removed in
torch 2.0, and its ``eigenvalues`` is a power iteration that finds only the eigenvalue of largest
magnitude. The iteration below is the textbook one with full reorthogonalisation (Golub & Van
Loan, ch. 10): with m ≤ 100 steps the stored basis is small, and reorthogonalising keeps spurious
copies of converged eigenvalues out of the tridiagonal matrix. The extreme Ritz values converge
first, which is why a few dozen steps give both ends of the spectrum.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from faasrl.rl.policy import ActorCritic


def lanczos_extremes(hvp: Callable[[torch.Tensor], torch.Tensor], dim: int, iterations: int,
                     *, generator: torch.Generator, device: torch.device | None = None
                     ) -> tuple[float, float, int]:
    """(λ_min, λ_max, steps) of the symmetric operator ``hvp`` on R^dim.

    ``hvp(v)`` returns H·v for a vector v of shape (dim,). The start vector is Gaussian from
    ``generator`` (a CPU generator), so a run is reproducible; the basis is kept in float64
    whatever ``hvp`` computes in. The iteration stops early when
    the Krylov space becomes invariant (β ≈ 0): the Ritz values are then exact eigenvalues.
    """
    if dim < 1 or iterations < 1:
        raise ValueError("dim and iterations must be at least 1")
    steps = min(iterations, dim)
    v = torch.randn(dim, generator=generator, dtype=torch.float64).to(device)
    v = v / v.norm()
    basis: list[torch.Tensor] = [v]
    alphas: list[float] = []
    betas: list[float] = []
    w = hvp(v).double()
    for j in range(steps):
        alpha = torch.dot(w, basis[j])
        alphas.append(alpha.item())
        w = w - alpha * basis[j] - (betas[-1] * basis[j - 1] if j > 0 else 0.0)
        q = torch.stack(basis)
        w = w - q.T @ (q @ w)  # full reorthogonalisation, twice is enough (Kahan)
        w = w - q.T @ (q @ w)
        beta = w.norm().item()
        if j == steps - 1 or beta <= 1e-10 * max(1.0, max(abs(a) for a in alphas)):
            break
        betas.append(beta)
        basis.append(w / beta)
        w = hvp(basis[-1]).double()
    ritz = np.linalg.eigvalsh(np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1))
    return float(ritz[0]), float(ritz[-1]), len(alphas)


def surrogate_objective(model: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                        advantages: torch.Tensor) -> torch.Tensor:
    """Nitro's L(θ) = mean_t log π_θ(a_t|s_t) · A_t (to be maximised)."""
    dist = model.distribution(obs)
    logprob = dist.log_prob(actions)
    if logprob.dim() > 1:  # a continuous action's dimensions are independent
        logprob = logprob.sum(-1)
    return (logprob * advantages).mean()


def surrogate_hessian_extremes(model: ActorCritic, batch: dict[str, torch.Tensor], *,
                               samples: int, iterations: int,
                               generator: torch.Generator) -> dict[str, Any]:
    """λ_min and λ_max of ∇²L on a random subset of ``samples`` rows of a round's batch.

    The Hessian is taken over the parameters L depends on (the policy head and, for a CNN, the
    shared trunk; not the critic). Returns the eigenvalues, the Lanczos steps, the subset size
    and the compute time in seconds, which the job records as Nitro's overhead.
    """
    t0 = time.perf_counter()
    size = batch["obs"].shape[0]
    idx = torch.randperm(size, generator=generator)[:samples].to(batch["obs"].device)
    objective = surrogate_objective(model, batch["obs"][idx], batch["actions"][idx],
                                    batch["advantages"][idx])
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(objective, params, create_graph=True, allow_unused=True)
    used = [(p, g) for p, g in zip(params, grads, strict=True) if g is not None]
    flat_grad = torch.cat([g.reshape(-1) for _, g in used])
    used_params = [p for p, _ in used]

    def hvp(v: torch.Tensor) -> torch.Tensor:
        hv = torch.autograd.grad(flat_grad, used_params, grad_outputs=v.to(flat_grad.dtype),
                                 retain_graph=True, allow_unused=True)
        return torch.cat([(h if h is not None else torch.zeros_like(p)).reshape(-1)
                          for h, p in zip(hv, used_params, strict=True)])

    lam_min, lam_max, steps = lanczos_extremes(hvp, flat_grad.numel(), iterations,
                                               generator=generator, device=flat_grad.device)
    return {"lambda_min": lam_min, "lambda_max": lam_max, "iterations": steps,
            "samples": int(idx.numel()), "seconds": time.perf_counter() - t0}
