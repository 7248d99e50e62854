"""The extreme Hessian eigenvalues of PPO's surrogate objective, for Nitro's boosting score.

Nitro measures the curvature of L(θ) = E_t[log π_θ(a_t|s_t) · A_t] around the freshly updated
policy: R = -λ_max/λ_min of H = ∇²_θ L. Forming H is out of the question (θ has 10^4-10^6
entries), so λ_min and λ_max come from a Lanczos iteration that only needs Hessian-vector
products.

Each product is Pearlmutter's R-operator written out layer by layer over the actor's chain
(Linear, Conv2d, the activations, Flatten) and its action head: a forward pass of tangents and a
backward pass of the gradient's tangents, reusing the activations, gradients and activation
derivatives that the model's own forward pass and one backward pass leave, once per request.
Autograd's double backward on a retained graph computes the same products but re-derives the
activation terms and walks ~50 graph nodes (~250 ATen calls) each time: on CartPole's 64x64
actor it took 1.35-1.45x as long (about 0.3 ms more per product); on Hopper's 256x256 the
matrix products dominate and the gain is 1.05-1.15x. ``torch.func``'s forward-over-reverse (``jvp``
of ``grad``) was 4x slower than autograd, ``linearize`` retraces for ~0.4 s per batch, and
``torch.compile`` took ~40 s to build a slower product (bench/nitro_overhead.py).

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
import torch.nn.functional as F
from torch import nn

from faasrl.rl.model_spec import ACTIVATIONS
from faasrl.rl.policy import ActorCritic

Tangents = dict[nn.Parameter, torch.Tensor]


def lanczos_extremes(hvp: Callable[[torch.Tensor], torch.Tensor], dim: int, iterations: int,
                     *, generator: torch.Generator, device: torch.device | None = None
                     ) -> tuple[float, float, int]:
    """(λ_min, λ_max, steps) of the symmetric operator ``hvp`` on R^dim.

    ``hvp(v)`` returns H·v for a vector v of shape (dim,). The start vector is Gaussian from
    ``generator`` (a CPU generator), so a run is reproducible; the basis is kept in float64
    whatever ``hvp`` computes in, in one preallocated matrix (restacking it every step was a
    third of the iteration's own cost). The iteration stops early when the Krylov space
    becomes invariant (β ≈ 0): the Ritz values are then exact eigenvalues.
    """
    if dim < 1 or iterations < 1:
        raise ValueError("dim and iterations must be at least 1")
    steps = min(iterations, dim)
    basis = torch.empty(steps, dim, dtype=torch.float64, device=device)
    v = torch.randn(dim, generator=generator, dtype=torch.float64).to(device)
    basis[0] = v / v.norm()
    alphas: list[float] = []
    betas: list[float] = []
    w = hvp(basis[0]).double()
    for j in range(steps):
        alphas.append(torch.dot(w, basis[j]).item())
        w = w - alphas[-1] * basis[j] - (betas[-1] * basis[j - 1] if j > 0 else 0.0)
        q = basis[:j + 1]
        w = torch.addmv(w, q.T, q @ w, alpha=-1)  # full reorthogonalisation, twice is
        w = torch.addmv(w, q.T, q @ w, alpha=-1)  # enough (Kahan)
        beta = w.norm().item()
        if j == steps - 1 or beta <= 1e-10 * max(1.0, max(abs(a) for a in alphas)):
            break
        betas.append(beta)
        basis[j + 1] = w / beta
        w = hvp(basis[j + 1]).double()
    ritz = np.linalg.eigvalsh(np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1))
    return float(ritz[0]), float(ritz[-1]), len(alphas)


# ---------------------------------------------------------------- the actor's layers
class _Layer:
    """One layer of the actor's chain. ``record`` is a forward hook: the model's own forward
    pass leaves each layer's input and output here, so nothing is recomputed or re-derived."""

    params: tuple[nn.Parameter, ...] = ()

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.x = self.y = torch.empty(0)

    def record(self, module: nn.Module, args: tuple[torch.Tensor, ...], y: torch.Tensor) -> None:
        self.x, self.y = args[0], y

    def backward(self, g: torch.Tensor, *, need_input: bool) -> torch.Tensor | None:
        """∂L/∂x from ∂L/∂y (None when the caller does not need it)."""
        raise NotImplementedError

    def tangent(self, r: torch.Tensor | None, dp: Tangents) -> torch.Tensor | None:
        """The output's tangent from the input's (None: the input does not depend on θ)."""
        raise NotImplementedError

    def tangent_backward(self, rg: torch.Tensor, r: torch.Tensor | None, dp: Tangents,
                         hv: Tangents, *, need_input: bool) -> torch.Tensor | None:
        """The tangent of ∂L/∂x from that of ∂L/∂y; puts the parameters' rows of H·v in hv."""
        raise NotImplementedError


class _Affine(_Layer):
    """Linear or Conv2d, y = A(x, W) + b with A bilinear: its tangents follow from A and A's
    two adjoints. Each takes an ``out`` to add into, so that on a Linear layer a sum of two
    products is one ``addmm``."""

    def __init__(self, module: nn.Linear | nn.Conv2d) -> None:
        super().__init__(module)
        self.params = (module.weight, module.bias)
        self.linear = isinstance(module, nn.Linear)
        self.conv_args = () if self.linear else (module.stride, module.padding,
                                                 module.dilation, module.groups)
        self.g = torch.empty(0)

    def _apply(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        if self.linear:
            return F.linear(x, w, b) if out is None else out.addmm_(x, w.T)
        y = F.conv2d(x, w, b, *self.conv_args)
        return y if out is None else out.add_(y)

    def _input_grad(self, g: torch.Tensor, w: torch.Tensor,
                    out: torch.Tensor | None = None) -> torch.Tensor:
        if self.linear:
            return g @ w if out is None else out.addmm_(g, w)
        grad = nn.grad.conv2d_input(self.x.shape, w, g, *self.conv_args)
        return grad if out is None else out.add_(grad)

    def _weight_grad(self, x: torch.Tensor, g: torch.Tensor,
                     out: torch.Tensor | None = None) -> torch.Tensor:
        if self.linear:
            return g.T @ x if out is None else out.addmm_(g.T, x)
        grad = nn.grad.conv2d_weight(x, self.params[0].shape, g, *self.conv_args)
        return grad if out is None else out.add_(grad)

    def backward(self, g: torch.Tensor, *, need_input: bool) -> torch.Tensor | None:
        self.g = g
        return self._input_grad(g, self.params[0]) if need_input else None

    def tangent(self, r: torch.Tensor | None, dp: Tangents) -> torch.Tensor:
        w, b = self.params
        out = self._apply(self.x, dp[w], dp[b])
        return out if r is None else self._apply(r, w, out=out)

    def tangent_backward(self, rg: torch.Tensor, r: torch.Tensor | None, dp: Tangents,
                         hv: Tangents, *, need_input: bool) -> torch.Tensor | None:
        w, b = self.params
        hv[w] = self._weight_grad(self.x, rg)
        if r is not None:
            self._weight_grad(r, self.g, hv[w])
        hv[b] = rg.sum(0) if self.linear else rg.sum((0, 2, 3))
        if not need_input:
            return None
        return self._input_grad(self.g, dp[w], self._input_grad(rg, w))


class _Activation(_Layer):
    """Tanh or ReLU, y = f(z): the tangent of its backward needs f'(z) and f''(z)·∂L/∂y, both
    fixed for the whole request (f'' is 0 for ReLU)."""

    def __init__(self, module: nn.Tanh | nn.ReLU) -> None:
        super().__init__(module)
        self.tanh = self.curved = isinstance(module, nn.Tanh)
        self.slope = self.curvature = torch.empty(0)

    def record(self, module: nn.Module, args: tuple[torch.Tensor, ...], y: torch.Tensor) -> None:
        super().record(module, args, y)
        self.slope = 1 - y * y if self.tanh else (y > 0).to(y.dtype)

    def backward(self, g: torch.Tensor, *, need_input: bool) -> torch.Tensor:
        if self.tanh:  # tanh'' = -2 y tanh'
            self.curvature = -2 * self.y * self.slope * g
        return self.slope * g

    def tangent(self, r: torch.Tensor | None, dp: Tangents) -> torch.Tensor | None:
        return None if r is None else self.slope * r

    def tangent_backward(self, rg: torch.Tensor, r: torch.Tensor | None, dp: Tangents,
                         hv: Tangents, *, need_input: bool) -> torch.Tensor:
        out = self.slope * rg
        return out.addcmul_(self.curvature, r) if self.curved and r is not None else out


class _Elementwise(_Activation):
    """Any other elementwise activation (ELU, GELU, SiLU, leaky ReLU): f'(z) and f''(z) from
    autograd on the recorded input, once per request."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__(module)
        self.curved = True
        self.second = torch.empty(0)

    def record(self, module: nn.Module, args: tuple[torch.Tensor, ...], y: torch.Tensor) -> None:
        _Layer.record(self, module, args, y)
        with torch.enable_grad():
            z = args[0].detach().requires_grad_()
            (first,) = torch.autograd.grad(module.forward(z).sum(), z, create_graph=True)
            second = torch.autograd.grad(first.sum(), z, allow_unused=True)[0] \
                if first.requires_grad else None
        self.slope = first.detach()
        self.second = torch.zeros_like(self.slope) if second is None else second

    def backward(self, g: torch.Tensor, *, need_input: bool) -> torch.Tensor:
        self.curvature = self.second * g
        return self.slope * g


class _Flatten(_Layer):
    """A reshape: tangents and gradients pass through with the shapes swapped."""

    def backward(self, g: torch.Tensor, *, need_input: bool) -> torch.Tensor:
        return g.reshape(self.x.shape)

    def tangent(self, r: torch.Tensor | None, dp: Tangents) -> torch.Tensor | None:
        return None if r is None else self.module(r)

    def tangent_backward(self, rg: torch.Tensor, r: torch.Tensor | None, dp: Tangents,
                         hv: Tangents, *, need_input: bool) -> torch.Tensor:
        return rg.reshape(self.x.shape)


_LAYERS: dict[type[nn.Module], type[_Layer]] = {
    **{getattr(nn, name): _Elementwise for name in ACTIVATIONS.values()},
    nn.Linear: _Affine, nn.Conv2d: _Affine, nn.Tanh: _Activation, nn.ReLU: _Activation,
    nn.Flatten: _Flatten}


def _actor_chain(model: ActorCritic) -> list[_Layer]:
    """The layers from the trunk's input to the actor's output, in parameter order."""
    modules = [m for m in (*model.trunk.modules(), *model.actor.modules())
               if not isinstance(m, nn.Sequential)]
    unknown = {type(m).__name__ for m in modules if type(m) not in _LAYERS}
    if unknown:
        raise TypeError(f"surrogate Hessian: no R-operator for {sorted(unknown)}")
    return [_LAYERS[type(m)](m) for m in modules]


@torch.no_grad()
def _record_forward(model: ActorCritic, chain: list[_Layer], obs: torch.Tensor) -> None:
    """The model's own forward pass (its observation scaling included), seen by the chain."""
    handles = [layer.module.register_forward_hook(layer.record) for layer in chain]
    try:
        model.distribution(obs)
    finally:
        for handle in handles:
            handle.remove()


# ----------------------------------------------------------------- the action heads
HeadTangent = Callable[[torch.Tensor, Tangents, Tangents], torch.Tensor]


def _categorical_head(logits: torch.Tensor, actions: torch.Tensor, weight: torch.Tensor
                      ) -> tuple[torch.Tensor, HeadTangent]:
    """∂L/∂logits and its tangent for L = Σ_t w_t·log softmax(logits_t)[a_t]."""
    p = torch.softmax(logits, -1)
    grad = weight * (F.one_hot(actions, p.shape[-1]).to(p.dtype) - p)

    def tangent(r: torch.Tensor, dp: Tangents, hv: Tangents) -> torch.Tensor:
        return -weight * p * (r - (p * r).sum(-1, keepdim=True))

    return grad, tangent


def _normal_head(mean: torch.Tensor, log_std: nn.Parameter, actions: torch.Tensor,
                 weight: torch.Tensor) -> tuple[torch.Tensor, HeadTangent]:
    """∂L/∂mean and its tangent for L = Σ_t w_t·log N(a_t; mean_t, e^log_std); log_std's own
    rows of H·v go into ``hv``."""
    inv_std = torch.exp(-log_std.detach())
    u = (actions - mean) * inv_std  # the standardised action
    grad = weight * u * inv_std

    def tangent(r: torch.Tensor, dp: Tangents, hv: Tangents) -> torch.Tensor:
        ds = dp[log_std]
        hv[log_std] = (-2 * weight * u * (inv_std * r + u * ds)).sum(0)
        return -weight * inv_std * (inv_std * r + 2 * u * ds)

    return grad, tangent


# ---------------------------------------------------------------- the product
def _head(model: ActorCritic, out: torch.Tensor, actions: torch.Tensor, weight: torch.Tensor
          ) -> tuple[torch.Tensor, HeadTangent, tuple[nn.Parameter, ...]]:
    """The action head's gradient, its tangent and its own parameters."""
    if model.spec.action_kind == "discrete":
        return (*_categorical_head(out, actions, weight), ())
    return (*_normal_head(out, model.log_std, actions, weight), (model.log_std,))


def surrogate_hvp(model: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                  advantages: torch.Tensor) -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
    """(v ↦ H·v, dim) for H = ∇²L, L(θ) = mean_t log π_θ(a_t|s_t)·A_t, over the parameters L
    depends on (the actor, a CNN's trunk, log_std; not the critic) in ``model.parameters()``
    order. The forward and backward passes happen here, once; a product computes tangents only.
    """
    chain = _actor_chain(model)
    first = next(i for i, layer in enumerate(chain) if layer.params)
    with torch.no_grad():
        _record_forward(model, chain, obs)
        g, head, head_params = _head(model, chain[-1].y, actions,
                                     (advantages / advantages.shape[0]).unsqueeze(-1))
        for i in range(len(chain) - 1, first - 1, -1):
            g = chain[i].backward(g, need_input=i > first)
    used = {id(p) for layer in chain for p in layer.params} | {id(p) for p in head_params}
    params = [p for p in model.parameters() if id(p) in used]
    sizes = [p.numel() for p in params]

    @torch.no_grad()
    def hvp(v: torch.Tensor) -> torch.Tensor:
        dp = {p: t.view_as(p) for p, t in zip(params, v.to(params[0].dtype).split(sizes),
                                               strict=True)}
        hv: Tangents = {}
        r, rs = None, []
        for layer in chain:
            rs.append(r)
            r = layer.tangent(r, dp)
        rg = head(r, dp, hv)
        for i in range(len(chain) - 1, first - 1, -1):
            rg = chain[i].tangent_backward(rg, rs[i], dp, hv, need_input=i > first)
        return torch.cat([hv[p].reshape(-1) for p in params])

    return hvp, sum(sizes)


def surrogate_hessian_extremes(model: ActorCritic, batch: dict[str, torch.Tensor], *,
                               samples: int, iterations: int,
                               generator: torch.Generator) -> dict[str, Any]:
    """λ_min and λ_max of ∇²L on a random subset of ``samples`` rows of a round's batch.

    Returns the eigenvalues, the Lanczos steps, the subset size and the compute time in
    seconds, which the job records as Nitro's overhead.
    """
    t0 = time.perf_counter()
    size = batch["obs"].shape[0]
    idx = torch.randperm(size, generator=generator)[:samples].to(batch["obs"].device)
    hvp, dim = surrogate_hvp(model, batch["obs"][idx], batch["actions"][idx],
                             batch["advantages"][idx])
    lam_min, lam_max, steps = lanczos_extremes(hvp, dim, iterations, generator=generator,
                                               device=batch["obs"].device)
    return {"lambda_min": lam_min, "lambda_max": lam_max, "iterations": steps,
            "samples": int(idx.numel()), "seconds": time.perf_counter() - t0}
