"""V-trace against hand-computed targets; IMPACT's and asynchronous PPO's gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from faasrl.algorithms import LearnerContext, impact, ppo
from faasrl.algorithms.impact import batch_gradient, vtrace
from faasrl.algorithms.ppo import compute_gae, truncated_gradient
from faasrl.rl.policy import ActorCritic, PolicySpec

LOG_HALF = math.log(0.5)


def _col(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64)[:, None]


def test_vtrace_matches_a_hand_computed_example():
    # One env, three steps, γ = 0.9; π/μ = 2, 0.5, 1, so ρ = c = (1, 0.5, 1) with ρ̄ = c̄ = 1.
    behaviour = _col(LOG_HALF, LOG_HALF, LOG_HALF)
    target = _col(0.0, math.log(0.25), LOG_HALF)
    rewards, values = _col(1.0, 2.0, 3.0), _col(1.0, 2.0, 0.5)
    bootstrap = torch.tensor([4.0], dtype=torch.float64)
    out = vtrace(behaviour, target, rewards, _col(0.9, 0.9, 0.9), values, bootstrap)
    # δ = 1·(1 + .9·2 - 1) = 1.8,  .5·(2 + .9·.5 - 2) = .225,  1·(3 + .9·4 - .5) = 6.1
    # v - V: t2 = 6.1; t1 = .225 + .9·.5·6.1 = 2.97; t0 = 1.8 + .9·1·2.97 = 4.473
    np.testing.assert_allclose(out.vs[:, 0], [5.473, 4.97, 6.6], rtol=1e-12)
    # advantages ρ_t (r_t + γ v_{t+1} - V(x_t)): 1·(1 + .9·4.97 - 1), .5·(2 + .9·6.6 - 2), 6.1
    np.testing.assert_allclose(out.pg_advantages[:, 0], [4.473, 2.97, 6.1], rtol=1e-12)
    np.testing.assert_allclose(out.clipped_rhos[:, 0], [1.0, 0.5, 1.0])


def test_vtrace_stops_at_episode_ends_and_clips_with_rho_bar():
    behaviour = _col(LOG_HALF, LOG_HALF, LOG_HALF)
    target = _col(0.0, math.log(0.25), LOG_HALF)
    rewards, values = _col(1.0, 2.0, 3.0), _col(1.0, 2.0, 0.5)
    bootstrap = torch.tensor([4.0], dtype=torch.float64)
    # The episode ends with step 1: nothing flows back from step 2 into steps 0-1.
    out = vtrace(behaviour, target, rewards, _col(0.9, 0.0, 0.9), values, bootstrap)
    # δ1 = .5·(2 - 2) = 0, so v1 = V1 = 2 and v0 = 1 + 1.8 = 2.8.
    np.testing.assert_allclose(out.vs[:, 0], [2.8, 2.0, 6.6], rtol=1e-12)
    # ρ̄ = 2 lets the first ratio through: δ0 = 2·1.8 = 3.6.
    loose = vtrace(behaviour, target, rewards, _col(0.9, 0.0, 0.9), values, bootstrap,
                   rho_bar=2.0, c_bar=2.0)
    assert loose.vs[0, 0].item() == pytest.approx(1.0 + 3.6)


def test_vtrace_on_policy_is_the_discounted_return():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(5, 2)).astype(np.float32)
    values = rng.normal(size=(5, 2)).astype(np.float32)
    ends = np.zeros((5, 2), bool)
    ends[2, 0] = True
    bootstrap = rng.normal(size=2).astype(np.float32)
    logp = torch.zeros(5, 2)
    out = vtrace(logp, logp, torch.from_numpy(rewards), torch.from_numpy(0.9 * (1.0 - ends)),
                 torch.from_numpy(values), torch.from_numpy(bootstrap))
    # GAE with λ = 1 gives the same targets (its "dones" mark the step *after* an end).
    dones = np.zeros((5, 2), bool)
    dones[3, 0] = True
    _, returns = compute_gae(rewards, values, dones, bootstrap, np.zeros(2, bool), 0.9, 1.0)
    np.testing.assert_allclose(out.vs.numpy(), returns, rtol=1e-5, atol=1e-5)


def _bandit() -> tuple[ActorCritic, dict[str, torch.Tensor]]:
    """Two actions, one observation: action 1 pays 1, action 0 pays 0; episodes of one step."""
    torch.manual_seed(0)
    model = ActorCritic(PolicySpec((1,), "float32", "discrete", 2, hidden=(8,)))
    n = 64
    actions = torch.arange(n) % 2
    with torch.no_grad():
        _, logp, _, _ = model.get_action_and_value(torch.ones(n, 1), actions)
    batch = {"obs": torch.ones(n, 1), "actions": actions, "logprobs": logp,
             "rewards": actions.float(), "ends": torch.ones(n), "last_obs": torch.ones(4, 1)}
    return model, batch


def _p_good(model: ActorCritic) -> float:
    with torch.no_grad():
        return model.distribution(torch.ones(1, 1)).probs[0, 1].item()


def test_impact_gradient_descends_toward_the_better_action():
    model, batch = _bandit()
    target = ActorCritic(model.spec)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    before = _p_good(model)
    for _ in range(10):
        target.load_state_dict(model.state_dict())
        grads, stats = batch_gradient(model, target, batch, impact.Config(), num_envs=4)
        assert set(grads) == {n for n, _ in model.named_parameters()}
        assert all(torch.isfinite(g).all() for g in grads.values())
        for name, p in model.named_parameters():
            p.grad = grads[name]
        optimizer.step()
    assert _p_good(model) > before + 0.2
    with torch.no_grad():
        pi = target.distribution(torch.ones(1, 1)).probs[0]
    mu = batch["logprobs"][:2].exp()  # the batch alternates actions 0, 1
    assert pi[1] > mu[1]  # π moved to action 1: ρ̄ = 1 clips its π/μ, action 0's counts whole
    assert stats["rho_mean"] == pytest.approx(((pi[0] / mu[0]).item() + 1) / 2)


def test_impact_rejects_a_batch_that_is_not_whole_steps_of_its_envs():
    model, batch = _bandit()
    with pytest.raises(ValueError, match="envs"):
        batch_gradient(model, model, batch, impact.Config(), num_envs=5)


def _ppo_batch() -> tuple[ActorCritic, dict[str, torch.Tensor]]:
    model, batch = _bandit()
    advantages = batch["actions"].float() * 2 - 1
    return model, {"obs": batch["obs"], "actions": batch["actions"],
                   "logprobs": batch["logprobs"] - 0.5,  # μ was less sure: ratios ≈ 1.65
                   "values": torch.zeros(64), "advantages": advantages, "returns": advantages}


def _actor_grad(grads: dict[str, torch.Tensor]) -> float:
    return sum(g.abs().sum().item() for n, g in grads.items() if n.startswith("actor"))


def test_ppo_gradient_passes_no_policy_gradient_where_the_truncation_binds():
    model, batch = _ppo_batch()
    cfg = ppo.Config(ent_coef=0.0, vf_coef=0.0, clip_coef=10.0)

    def with_(**truncation: object) -> ppo.Config:
        return cfg.model_copy(update=truncation)

    off, _ = truncated_gradient(model, batch, with_(truncation="off"))
    # ρ = 1 caps every ratio (≈ 1.65) under the paper's form: no sample has a gradient left.
    paper, stats = truncated_gradient(model, batch, with_(truncation="paper", rho=1.0))
    assert _actor_grad(off) > 0 and _actor_grad(paper) == 0
    assert stats["truncated"] == 1.0
    # A peer whose ratio is lower caps the artifact form too, a higher ρ does not lift it.
    peer = [batch["logprobs"] + 0.1]  # peer ratio ≈ 1.1
    artifact, stats = truncated_gradient(model, batch, with_(truncation="artifact", rho=1.0),
                                         peer_logprobs=peer)
    assert _actor_grad(artifact) == 0 and stats["truncated"] == 1.0
    loose, stats = truncated_gradient(model, batch, with_(truncation="paper", rho=5.0))
    assert _actor_grad(loose) == pytest.approx(_actor_grad(off)) and stats["truncated"] == 0


def _halves(batch: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    return [{k: v[:32] for k, v in batch.items()}, {k: v[32:] for k, v in batch.items()}]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k]) for k in a)


def test_ppo_learner_step_evaluates_its_peers_on_all_its_batches():
    model, batch = _ppo_batch()
    cfg = ppo.Config(truncation="artifact", rho=1.0)
    torch.manual_seed(1)
    peer = ActorCritic(model.spec)
    learner = LearnerContext(model, ActorCritic(model.spec), clock=0,
                             peers=lambda: [peer.state_dict()], version=lambda v: None)
    grads, stats = ppo.gradient(learner, _halves(batch), cfg)
    with torch.no_grad():
        peer_logprobs = peer.get_action_and_value(batch["obs"], batch["actions"])[1]
    want, _ = truncated_gradient(model, batch, cfg, peer_logprobs=[peer_logprobs])
    assert stats["peers"] == 1 and _same(grads, want)


def test_impact_learner_step_trains_against_the_version_target_update_frequency_back():
    model, batch = _bandit()
    cfg = impact.Config(target_update_frequency=2)
    torch.manual_seed(1)
    target = ActorCritic(model.spec)
    asked: list[int] = []

    def version(v: int) -> dict[str, torch.Tensor]:
        asked.append(v)
        return target.state_dict()

    learner = LearnerContext(model, ActorCritic(model.spec), clock=3, peers=list,
                             version=version)
    grads, _ = impact.gradient(learner, [batch, batch], cfg)
    assert asked == [1] and _same(grads, batch_gradient(model, target, batch, cfg, num_envs=4)[0])
    # Once that version is evicted, the current policy stands in for the target.
    learner.version = lambda v: None
    grads, _ = impact.gradient(learner, [batch], cfg)
    assert _same(grads, batch_gradient(model, model, batch, cfg, num_envs=4)[0])
