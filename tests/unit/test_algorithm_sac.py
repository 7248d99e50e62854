"""SAC's pieces against hand-computed examples: the soft critic target, the squashed Gaussian's
log-density, the temperature's direction, Polyak averaging, the actor's actions, and the
learner step (weights, priorities, checkpoints)."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch
from torch import nn

from faasrl.algorithms.sac import (
    FAMILY_DEFAULTS,
    Config,
    QNetwork,
    act,
    greedy_slot,
    initial_state,
    make_model,
    make_optimizer,
    priorities,
    soft_q_targets,
    soft_update,
    squashed_gaussian,
    train,
)
from faasrl.data.codec import decode_optimizer, decode_tensors, encode_optimizer, encode_tensors
from faasrl.rl.policy import PolicySpec

SPEC = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="continuous", action_dim=2,
                  action_low=(-2.0, 0.0), action_high=(2.0, 5.0))


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only contend (20x slower on a busy box)
    yield
    torch.set_num_threads(threads)


SMALL = Config(model={"hidden": [32, 32]}, batch_size=64, learning_starts=64, learning_rate=3e-3)


def _batch(n: int = 64, seed: int = 0) -> dict[str, torch.Tensor]:
    """Terminal transitions (discount 0), so the critics' target is the learnable return."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 3, generator=g)
    low, high = torch.tensor(SPEC.action_low), torch.tensor(SPEC.action_high)
    actions = low + (high - low) * torch.rand(n, 2, generator=g)
    return {"obs": obs, "actions": actions, "returns": obs[:, 0] - 0.5 * actions[:, 1],
            "next_obs": torch.randn(n, 3, generator=g), "discounts": torch.zeros(n),
            "priorities": torch.ones(n), "weights": torch.ones(n)}


def test_every_family_default_is_a_valid_config_with_uniform_replay():
    for family in ("classic", "mujoco", "atari", "other"):
        defaults = FAMILY_DEFAULTS[family]
        cfg = Config(**defaults["hyperparameters"])
        assert cfg.alpha == 0.0 and cfg.n_step == 1
        assert defaults["envs_per_actor"] >= 1 and defaults["steps_per_actor"] >= 1


class _Affine(nn.Module):
    """Q(s, a) = s + k·a for one-dimensional s and a."""

    def __init__(self, k: float):
        super().__init__()
        self.k = k

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return (obs + self.k * actions).squeeze(1)


def test_soft_target_bootstraps_the_smaller_target_critic_minus_the_entropy_term(monkeypatch):
    spec = PolicySpec(obs_shape=(1,), obs_dtype="float32", action_kind="continuous",
                      action_dim=1, action_low=(-1.0,), action_high=(1.0,))
    model = make_model(spec, Config(model={"hidden": [8, 8]}, entropy_coef=0.5))
    next_actions, log_probs = torch.tensor([[0.5], [-0.5], [-0.5]]), torch.tensor([-1.0, 2.0, 2.0])
    monkeypatch.setattr(model, "sample", lambda obs, generator=None: (next_actions, log_probs))
    model.q1_target, model.q2_target = _Affine(2.0), _Affine(-1.0)
    y = soft_q_targets(model, next_obs=torch.tensor([[1.0], [3.0], [3.0]]),
                       returns=torch.tensor([1.0, 2.0, 2.0]),
                       discounts=torch.tensor([0.5, 1.0, 0.0]))
    # row 0: min(1 + 1, 1 - 0.5) = 0.5, minus α log π = 0.5 · -1: 1 + 0.5 · (0.5 + 0.5)
    # row 1: min(3 - 1, 3 + 0.5) = 2, minus 0.5 · 2: 2 + 1 · (2 - 1); row 2 ended: R alone
    assert y.tolist() == pytest.approx([1.5, 3.0, 2.0])


def test_squashed_log_density_is_the_gaussians_through_the_change_of_variables():
    g = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(5, 2, generator=g), 0.5 * torch.randn(5, 2, generator=g)
    noise = torch.randn(5, 2, generator=g)
    y, log_prob = squashed_gaussian(mean.double(), log_std.double(), noise.double())
    u = torch.atanh(y)
    direct = (torch.distributions.Normal(mean.double(), log_std.double().exp()).log_prob(u)
              - torch.log(1 - y ** 2)).sum(-1)
    assert torch.allclose(log_prob, direct, atol=1e-9)
    # where float32's tanh saturates (1 - tanh²(12) rounds to 0) the density stays finite
    y, log_prob = squashed_gaussian(torch.tensor([[12.0]]), torch.tensor([[0.0]]),
                                    torch.tensor([[0.0]]))
    exact = -0.5 * math.log(2 * math.pi) + 2 * math.log(math.cosh(12.0))
    assert y.item() == 1.0 and log_prob.item() == pytest.approx(exact, rel=1e-6)


def _with_log_std(model: nn.Module, log_std: float) -> nn.Module:
    """Make the actor's Gaussian N(0, e^log_std) whatever the observation."""
    last = model.actor[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0, 0.0, log_std, log_std]))
    return model


@pytest.mark.parametrize(("log_std", "grows"), [(-5.0, True), (0.0, False)])
def test_the_temperature_grows_when_entropy_is_below_target_and_shrinks_above(log_std, grows):
    torch.manual_seed(0)
    model = _with_log_std(make_model(SPEC, SMALL), log_std)
    before = model.log_alpha.item()
    stats, _, _ = train(model, make_optimizer(model, SMALL), [_batch()], SMALL,
                        initial_state(SMALL))
    assert (stats["entropy"] < model.target_entropy) == grows  # target: -2
    assert (model.log_alpha.item() > before) == grows
    fixed = Config(model={"hidden": [32, 32]}, autotune=False)
    model = _with_log_std(make_model(SPEC, fixed), log_std)
    train(model, make_optimizer(model, fixed), [_batch()], fixed, initial_state(fixed))
    assert model.log_alpha.item() == before


def test_polyak_averaging_moves_each_target_parameter_tau_of_the_way():
    torch.manual_seed(0)
    small = replace(SPEC, hidden=(8, 8), activation="relu")
    online, target = QNetwork(3, 2, small), QNetwork(3, 2, small)
    old, kept = copy.deepcopy(target), copy.deepcopy(online)
    soft_update(target, online, 0.25)
    for t, t0, o, o0 in zip(target.parameters(), old.parameters(), online.parameters(),
                            kept.parameters(), strict=True):
        assert torch.allclose(t - t0, 0.25 * (o - t0), atol=1e-7)
        assert torch.equal(o, o0)


def test_actions_stay_in_the_box_uniform_until_trained_then_reproducible_and_greedy_mode():
    model, obs = make_model(SPEC, SMALL), torch.randn(4000, 3)
    low, high = torch.tensor(SPEC.action_low), torch.tensor(SPEC.action_high)

    def sample(seed: int | None, explore: bool = True, slot: int = 0) -> torch.Tensor:
        g = None if seed is None else torch.Generator().manual_seed(seed)
        return act(model, obs, SMALL, slot=slot, actors=4, generator=g, explore=explore)

    uniform = sample(0)
    assert uniform.dtype == torch.float32 and uniform.shape == (4000, 2)
    assert ((uniform >= low) & (uniform <= high)).all()
    # an untrained model covers the whole box, which its narrow initial Gaussian would not
    assert (uniform.min(0).values < low + 0.02 * (high - low)).all()
    assert (uniform.max(0).values > high - 0.02 * (high - low)).all()
    assert (uniform.mean(0) - (low + high) / 2).abs().lt(0.05 * (high - low)).all()

    model.updates.fill_(1)
    _with_log_std(model, 2.0)
    with torch.no_grad():
        model.actor[-1].bias[:2] = torch.tensor([30.0, -30.0])
    sampled = sample(1)
    assert ((sampled >= low) & (sampled <= high)).all()
    assert torch.equal(sampled, sample(1)) and not torch.equal(sampled, sample(2))
    # no per-actor exploration (Ape-X's ε): every slot samples alike, and every slot's episodes
    # count toward the target reward
    assert torch.equal(sampled, sample(1, slot=3)) and greedy_slot(4) is None
    greedy = sample(None, explore=False)
    assert torch.equal(greedy, sample(3, explore=False))
    assert torch.equal(greedy, torch.stack([high[0], low[1]]).expand(4000, 2))  # tanh(±30)


def test_train_fits_the_critics_returns_priorities_and_its_checkpoint_resumes_exactly():
    torch.manual_seed(0)
    model = make_model(SPEC, SMALL)
    optimizer, state = make_optimizer(model, SMALL), initial_state(SMALL)
    batch = _batch()
    initial = priorities(model, batch, SMALL)
    first, state, new = train(model, optimizer, [batch, _batch(seed=1), batch], SMALL, state)
    assert new.shape == (3 * 64,) and state == {"learner_steps": 3}
    assert torch.allclose(new[:64], initial)  # discount 0: the same |R - Q1| the actor computes
    assert set(first) == {"q_loss", "actor_loss", "alpha", "entropy", "q_mean"}
    _, state, _ = train(model, optimizer, [batch] * 60, SMALL, state)
    last, state, _ = train(model, optimizer, [batch], SMALL, state)
    assert last["q_loss"] < 0.2 * first["q_loss"] and state == {"learner_steps": 64}

    # what actors and a resumed learner do: decode the published version and optimizer state
    resumed = make_model(SPEC, SMALL)
    resumed.load_state_dict(decode_tensors(encode_tensors(model.state_dict()))[0])
    resumed_optimizer = make_optimizer(resumed, SMALL)
    resumed_optimizer.load_state_dict(decode_optimizer(encode_optimizer(
        optimizer.state_dict())))
    assert int(resumed.updates) == 64
    outputs = []
    for net, opt in ((model, optimizer), (resumed, resumed_optimizer)):
        torch.manual_seed(1)
        stats, _, errors = train(net, opt, [_batch(seed=2)], SMALL, state)
        outputs.append((stats, errors, net.q1_target.net[0].weight.clone()))
    assert outputs[0][0] == outputs[1][0]
    assert torch.equal(outputs[0][1], outputs[1][1]) and torch.equal(outputs[0][2], outputs[1][2])


def test_zero_importance_weights_leave_the_critics_alone():
    torch.manual_seed(0)
    model = make_model(SPEC, SMALL)
    before = copy.deepcopy(model.q1.state_dict())
    batch = {**_batch(), "weights": torch.zeros(64)}
    train(model, make_optimizer(model, SMALL), [batch], SMALL, initial_state(SMALL))
    assert all(torch.equal(v, model.q1.state_dict()[k]) for k, v in before.items())


def test_unbounded_or_discrete_actions_are_refused():
    unbounded = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="continuous",
                           action_dim=1, action_low=(-math.inf,), action_high=(math.inf,))
    discrete = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="discrete",
                          action_dim=2)
    for spec in (unbounded, discrete):
        with pytest.raises(ValueError, match="finite bounds"):
            make_model(spec, SMALL)
