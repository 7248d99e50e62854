"""A rollout's per-step policy forward in a handful of tensor ops.

A rollout calls its policy once per env step on a few observations, where torch's per-call
overheads (a module call per layer, distribution objects, a multinomial per step) cost several
times the arithmetic: ``get_action_and_value`` takes about 0.28 ms a step on CartPole's 64x64
MLPs, this about 0.04 ms. :class:`FusedPolicy` snapshots an :class:`ActorCritic`'s heads with the
actor's and the critic's layers side by side (the first ones stacked, the later ones
block-diagonal), so that one chain of ``addmm`` computes the action scores and the value, and a
rollout draws its sampling noise for all its steps at once from its generator.

Sampling stays exact: Gumbel-max (``argmax(logits + g)``, ``g = -log(-log(u))``) for categorical
actions, ``mean + std * eps`` for Gaussian ones, with the policy's log-probs
(``tests/unit/test_rl_fused.py`` checks both against ``torch.distributions``).
"""

from __future__ import annotations

import torch
from torch import nn

from faasrl.rl.policy import ActorCritic


def _layers(head: nn.Module) -> list[tuple[nn.Linear, bool]]:
    """A head's linear layers, each with whether a tanh follows it (``policy._mlp``'s layout,
    or one plain linear layer on a CNN trunk)."""
    if isinstance(head, nn.Linear):
        return [(head, False)]
    layers: list[tuple[nn.Linear, bool]] = []
    for module in head:
        if isinstance(module, nn.Linear):
            layers.append((module, False))
        elif isinstance(module, nn.Tanh) and layers:
            layers[-1] = (layers[-1][0], True)
        else:
            raise TypeError(f"cannot fuse a head with {type(module).__name__}")
    return layers


class FusedPolicy:
    """An :class:`ActorCritic`'s heads as they are now, fused for stepping (build it again
    after new weights are loaded). Runs without gradients, on the policy's device; the noise is
    drawn on the CPU, where rollouts run."""

    def __init__(self, policy: ActorCritic) -> None:
        self.policy = policy
        self.layers: list[tuple[torch.Tensor, torch.Tensor, bool]] = []  # (bias, weight.T, tanh)
        with torch.no_grad():
            pairs = zip(_layers(policy.actor), _layers(policy.critic), strict=True)
            for i, ((actor, tanh), (critic, critic_tanh)) in enumerate(pairs):
                if tanh != critic_tanh:
                    raise TypeError("the actor's and critic's layers differ: cannot fuse them")
                weight = torch.cat([actor.weight, critic.weight]) if i == 0 \
                    else torch.block_diag(actor.weight, critic.weight)
                self.layers.append((torch.cat([actor.bias, critic.bias]), weight.t(), tanh))
            # None for categorical actions; the Gaussian's standard deviations
            self.std = None if policy.spec.action_kind == "discrete" else policy.log_std.exp()

    def noise(self, steps: int, envs: int, generator: torch.Generator) -> torch.Tensor:
        """The sampling noise of ``steps`` steps in ``envs`` envs, from ``generator``: Gumbel
        noise per action (categorical), standard normal per action dimension (Gaussian)."""
        shape = (steps, envs, self.policy.spec.action_dim)
        if self.std is not None:
            return torch.randn(shape, generator=generator)
        u = torch.rand(shape, generator=generator)
        # u = 0 (a 2^-24 chance) would make its action impossible: the smallest normal instead.
        return -torch.log(-torch.log(u.clamp_(min=torch.finfo(u.dtype).tiny)))

    def outputs(self, steps: int, envs: int) -> torch.Tensor:
        """Room for ``steps`` steps' head outputs: action scores (logits or Gaussian means),
        then the value."""
        return torch.empty((steps, envs, self.policy.spec.action_dim + 1))

    def __call__(self, obs: torch.Tensor, noise: torch.Tensor, out: torch.Tensor
                 ) -> torch.Tensor:
        """The actions sampled for ``obs`` with ``noise`` (one step's slice of :meth:`noise`);
        the heads' output goes to ``out`` (one step's slice of :meth:`outputs`), for
        :meth:`log_probs_and_values` to read once the rollout is over. Call it under
        ``torch.no_grad()`` (a rollout's ``collect`` is): a no_grad per step costs more
        than a layer."""
        x = self.policy.features(obs)
        last = len(self.layers) - 1
        for i, (bias, weight, tanh) in enumerate(self.layers):
            x = torch.addmm(bias, x, weight, out=out if i == last else None)
            if tanh:
                x = x.tanh_()
        scores = out[:, :-1]
        return (scores + noise).argmax(-1) if self.std is None else scores + self.std * noise

    @torch.no_grad()
    def log_probs_and_values(self, outputs: torch.Tensor, actions: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-probs of the ``actions`` taken and the values, shaped as ``outputs``' leading
        dimensions, in one batched pass over a rollout's head outputs."""
        lead = outputs.shape[:-1]
        scores = outputs[..., :-1].reshape(-1, outputs.shape[-1] - 1)
        logprob = self.policy.log_prob(scores, actions.reshape(len(scores), -1).squeeze(-1)
                                       if self.std is None else actions.reshape(scores.shape))
        return logprob.reshape(lead), outputs[..., -1]
