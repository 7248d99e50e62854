"""DQN's pieces against hand-computed examples: Ape-X's per-actor ε, double-DQN targets, the
prioritized Huber loss, the dueling head, and a learner call (target sync, priorities)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from faasrl.algorithms import dqn
from faasrl.algorithms.dqn import (
    FAMILY_DEFAULTS,
    Config,
    actor_epsilon,
    double_dqn_targets,
    td_loss,
)
from faasrl.algorithms.offpolicy import replay_memory_mb, stored_transition_bytes, transition_bytes
from faasrl.manifest import load_manifest
from faasrl.rl.policy import PolicySpec
from faasrl.rl.qnetwork import DuelingQNetwork

BUFFER_MANIFEST = Path(__file__).parents[2] / "functions" / "buffer" / "manifest.yaml"
SPEC = PolicySpec(obs_shape=(4,), obs_dtype="float32", action_kind="discrete", action_dim=3)


def test_ape_x_epsilons_spread_from_epsilon_to_epsilon_to_the_eighth():
    cfg = Config()
    eps = [actor_epsilon(i, 8, cfg) for i in range(8)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)
    assert eps == sorted(eps, reverse=True)
    assert actor_epsilon(0, 1, cfg) == pytest.approx(0.4)


class _Table(nn.Module):
    """Q-values read from a table by a one-hot state."""

    def __init__(self, table: list[list[float]]):
        super().__init__()
        self.table = torch.tensor(table)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.float() @ self.table


def test_double_dqn_bootstraps_the_target_net_at_the_online_nets_choice():
    online = _Table([[1.0, 5.0], [3.0, 2.0]])  # picks action 1 in state 0, action 0 in state 1
    target = _Table([[10.0, 20.0], [30.0, 40.0]])
    next_obs = torch.eye(2)
    y = double_dqn_targets(online, target, next_obs, returns=torch.tensor([1.0, 2.0]),
                           discounts=torch.tensor([0.5, 0.0]))
    assert y.tolist() == [1 + 0.5 * 20, 2.0]  # an ended episode (discount 0) takes R alone
    y = double_dqn_targets(online, target, next_obs, returns=torch.tensor([0.0, 0.0]),
                           discounts=torch.tensor([1.0, 1.0]))
    assert y.tolist() == [20.0, 30.0]  # vanilla DQN's max over the target net: 20 and 40


def test_td_loss_weights_each_huber_term_and_returns_the_new_priorities():
    online = _Table([[0.0, 0.0], [0.0, 0.0]])
    obs, actions = torch.eye(2), torch.tensor([0, 1])
    loss, priorities = td_loss(online, obs, actions, targets=torch.tensor([0.5, 3.0]),
                               weights=torch.tensor([1.0, 0.5]))
    assert loss.item() == pytest.approx((0.5 * 0.5 ** 2 + 0.5 * (3.0 - 0.5)) / 2)
    assert priorities.tolist() == [0.5, 3.0]


def test_the_dueling_head_averages_to_the_state_value():
    torch.manual_seed(0)
    net = DuelingQNetwork(replace(SPEC, hidden=(16, 16), activation="relu"))
    obs = torch.randn(5, 4)
    q = net(obs)
    value = net.value(net.trunk(obs)).squeeze(1)
    assert q.shape == (5, 3) and torch.allclose(q.mean(dim=1), value, atol=1e-6)


def test_the_cnn_trunk_takes_uint8_frames():
    frames = PolicySpec(obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete",
                        action_dim=6, arch="cnn", hidden=(32,))
    q = DuelingQNetwork(frames)(torch.zeros(2, 4, 84, 84, dtype=torch.uint8))
    assert q.shape == (2, 6)


def _batch(rows: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    return {"obs": torch.randn(rows, 4, generator=generator),
            "actions": torch.randint(3, (rows,), generator=generator),
            "returns": torch.randn(rows, generator=generator),
            "next_obs": torch.randn(rows, 4, generator=generator),
            "discounts": torch.full((rows,), 0.9), "weights": torch.ones(rows)}


def test_a_learner_call_steps_once_per_batch_syncs_the_target_and_returns_priorities():
    torch.manual_seed(0)
    cfg = Config(model={"hidden": [16, 16]}, target_update=3, learning_rate=1e-2, batch_size=8)
    model, g = dqn.make_model(SPEC, cfg), torch.Generator().manual_seed(0)
    optimizer = dqn.make_optimizer(model, cfg)
    batches = [_batch(8, g) for _ in range(4)]
    stats, state, new = dqn.train(model, optimizer, batches, cfg, dqn.initial_state(cfg))
    assert state == {"learner_steps": 4} and new.shape == (32,) and (new >= 0).all()
    # Synced after step 3 and not since: the target holds step 3's online weights, which
    # step 4 moved on from.
    online, target = model.online.state_dict(), model.target.state_dict()
    assert not all(torch.equal(online[k], target[k]) for k in online)
    stats, state, _ = dqn.train(model, optimizer, batches[:2], cfg, state)  # steps 5, 6
    assert state["learner_steps"] == 6 and set(stats) == {"loss", "target_mean"}
    online, target = model.online.state_dict(), model.target.state_dict()
    assert all(torch.equal(online[k], target[k]) for k in online)  # synced at step 6


def test_the_edge_priority_is_the_double_dqn_td_error():
    cfg = Config(model={"hidden": [16, 16]})
    model = dqn.make_model(SPEC, cfg)
    batch = _batch(5, torch.Generator().manual_seed(1))
    want = (double_dqn_targets(model.online, model.target, batch["next_obs"],
                               batch["returns"], batch["discounts"])
            - model.online(batch["obs"]).gather(1, batch["actions"][:, None]).squeeze(1)).abs()
    assert torch.allclose(dqn.priorities(model, batch, cfg), want)


def test_acting_greedily_takes_the_argmax_and_the_last_actor_explores_least():
    cfg = Config(model={"hidden": [16, 16]})
    model, obs = dqn.make_model(SPEC, cfg), torch.randn(200, 4)
    greedy = model.online(obs).argmax(1)
    assert torch.equal(dqn.act(model, obs, cfg, slot=0, actors=1, generator=None,
                               explore=False), greedy)
    g = torch.Generator().manual_seed(0)
    off = [(dqn.act(model, obs, cfg, slot=s, actors=4, generator=g) != greedy).float().mean()
           for s in (0, 3)]
    assert 0.15 < off[0] < 0.45 and off[1] < 0.02  # ε 0.4 (2/3 of it a different action)
    assert dqn.greedy_slot(4) == 3 and dqn.greedy_slot(1) is None


def test_the_long_haul_papers_atari_memory_fits_the_buffer_function():
    """65,536 Pong transitions: whole stacks would need 10 GiB with snapshots; distinct frames
    fit the buffer's memory_mb."""
    layout = {"obs": ("uint8", (4, 84, 84)), "actions": ("int64", ()), "returns": ("float32", ()),
              "next_obs": ("uint8", (4, 84, 84)), "discounts": ("float32", ()),
              "priorities": ("float32", ())}
    size = Config(**FAMILY_DEFAULTS["atari"]["hyperparameters"]).memory_size
    assert size == 65_536
    budget = load_manifest(BUFFER_MANIFEST).memory_mb
    assert replay_memory_mb(size, transition_bytes(layout)) > 2 * budget
    assert replay_memory_mb(size, stored_transition_bytes(layout)) <= budget


def _reference_train(model: dqn.QLearner, optimizer: torch.optim.Optimizer,
                     batches: list[dict[str, torch.Tensor]], cfg: Config, steps: int
                     ) -> tuple[list[float], list[float], torch.Tensor]:
    """DQN's gradient step written plainly, one batch at a time, as the learner computed it
    before it was made faster: per-step losses and target means, and the new |δ|."""
    losses, target_means, new = [], [], []
    for batch in batches:
        with torch.no_grad():
            best = model.online(batch["next_obs"]).argmax(dim=1, keepdim=True)
            targets = batch["returns"] + batch["discounts"] * \
                model.target(batch["next_obs"]).gather(1, best).squeeze(1)
        q = model.online(batch["obs"]).gather(1, batch["actions"].unsqueeze(1)).squeeze(1)
        loss = (batch["weights"] * nn.functional.huber_loss(q, targets, reduction="none")).mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.online.parameters(), cfg.max_grad_norm)
        optimizer.step()
        steps += 1
        if steps % cfg.target_update == 0:
            model.target.load_state_dict(model.online.state_dict())
        losses.append(loss.item())
        target_means.append(targets.mean().item())
        new.append((targets - q).detach().abs())
    return losses, target_means, torch.cat(new)


def test_the_learner_computes_what_the_plain_gradient_step_computes():
    """Three learner calls of 4 batches, a target sync every 5 steps (inside a call and
    across calls), clipping that bites, IS weights: the weights, the optimizer's moments, the
    new priorities and the stats are those of the plain loop, bit for bit, with the same
    optimizer. The speed-ups (the target net's values from one forward pass per sync period,
    clipping over a list built once, stats read back once per call) change no arithmetic."""
    cfg = Config(model={"hidden": [32, 32]}, target_update=5, learning_rate=1e-2,
                 batch_size=16, max_grad_norm=0.05)
    torch.manual_seed(0)
    fast = dqn.make_model(SPEC, cfg)
    plain = dqn.make_model(SPEC, cfg)
    plain.load_state_dict(fast.state_dict())
    fast_opt = dqn.make_optimizer(fast, cfg)
    plain_opt = dqn.make_optimizer(plain, cfg)
    g = torch.Generator().manual_seed(3)
    state = dqn.initial_state(cfg)
    for call in range(3):
        batches = [{**_batch(16, g), "weights": torch.rand(16, generator=g)} for _ in range(4)]
        stats, state, new = dqn.train(fast, fast_opt, batches, cfg, state)
        losses, target_means, want = _reference_train(plain, plain_opt, batches, cfg, 4 * call)
        assert state == {"learner_steps": 4 * (call + 1)}
        assert torch.equal(new, want)
        assert stats == pytest.approx({"loss": sum(losses) / 4,
                                       "target_mean": sum(target_means) / 4}, rel=1e-12)
    assert fast.state_dict().keys() == plain.state_dict().keys()
    for key, value in plain.state_dict().items():
        assert torch.equal(fast.state_dict()[key], value), key
    moments = [s for s in fast_opt.state_dict()["state"].values()]
    for mine, theirs in zip(moments, plain_opt.state_dict()["state"].values(), strict=True):
        assert all(torch.equal(mine[k], theirs[k]) for k in ("exp_avg", "exp_avg_sq"))
    assert not torch.equal(fast.online.state_dict()["advantage.weight"],
                           fast.target.state_dict()["advantage.weight"])  # step 12: unsynced


def test_the_fused_adam_is_torchs_per_parameter_adam_up_to_rounding():
    """The learner's Adam against the per-parameter loop on the same 20 gradients: the same
    weights to float32 rounding (an ε, a β or a learning rate off by 1% would be 1e-4 away)."""
    cfg = Config(model={"hidden": [32, 32]}, learning_rate=1e-2)
    torch.manual_seed(0)
    model = dqn.make_model(SPEC, cfg)
    fused = dqn.make_optimizer(model, cfg)
    params = list(model.online.parameters())
    copies = [p.detach().clone().requires_grad_() for p in params]
    loop = torch.optim.Adam(copies, lr=cfg.learning_rate, eps=cfg.adam_eps, foreach=False)
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        for p, c in zip(params, copies, strict=True):
            p.grad = torch.randn(p.shape, generator=g) * 1e-3
            c.grad = p.grad.clone()
        fused.step()
        loop.step()
    for p, c in zip(params, copies, strict=True):
        torch.testing.assert_close(p, c, rtol=1e-6, atol=1e-7)
    assert fused.defaults["fused"] and fused.defaults["eps"] == cfg.adam_eps
