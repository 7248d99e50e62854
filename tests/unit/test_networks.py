"""Networks from the job spec's ``model`` section: the defaults are the networks of before, byte
for byte (stored checkpoints and model files still load), and other sections build what they
say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from faasrl.algorithms import algorithm
from faasrl.jobs.spec import JobSpec
from faasrl.rl.cnn import Residual
from faasrl.rl.model_spec import ActorCriticModelSpec, NetworkError, trunk
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for

# Written by fingerprints() on the code before the model section existed (each algorithm's
# network fixed per env family, or one ``hidden`` width), seed 0.
BEFORE = Path(__file__).parent / "data" / "default_networks.json"


def build(name: str, env_id: str, hyperparameters: dict[str, Any] | None = None,
          seed: int = 0) -> nn.Module:
    """The model a job's learner builds: the job spec's Config (its family's defaults filled
    in) through the algorithm's make_model."""
    cfg = JobSpec.model_validate({"algorithm": name, "env_id": env_id,
                                  "hyperparameters": hyperparameters or {}}).hyperparameters
    spec = policy_spec_for(env_id)
    torch.manual_seed(seed)
    return algorithm(name).make_model(spec, cfg)


def fingerprints(model: nn.Module) -> dict[str, list[Any]]:
    """Per state-dict entry: shape, sum and absolute sum (the init, to 6 decimals)."""
    return {k: [list(v.shape), round(float(v.double().sum()), 6),
                round(float(v.double().abs().sum()), 6)] for k, v in model.state_dict().items()}


@pytest.mark.parametrize("case", sorted(json.loads(BEFORE.read_text())))
def test_the_default_networks_are_those_of_before_byte_for_byte(case: str):
    """The same entries, shapes and init. The sums only to 1e-6 relative: orthogonal init's
    QR (LAPACK) rounds differently with torch's thread count (1 in an actor, 2 here), on the
    old code alike."""
    name, env_id = case.split(" ")
    got, want = fingerprints(build(name, env_id)), json.loads(BEFORE.read_text())[case]
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
    assert {k: v[1:] for k, v in got.items()} == {
        k: pytest.approx(v[1:], rel=1e-6, abs=1e-4) for k, v in want.items()}


def test_dqns_one_width_of_before_builds_the_same_network():
    """``hidden: h`` meant two layers h wide, or one after Atari's CNN."""
    for env_id, model in (("CartPole-v1", {"hidden": [96, 96]}), ("ALE/Pong-v5",
                                                                  {"hidden": [96]})):
        old, new = build("dqn", env_id, {"hidden": 96}), build("dqn", env_id, {"model": model})
        assert fingerprints(old) == fingerprints(new)
    sac = build("sac", "Pendulum-v1", {"hidden": 32})
    assert [m.out_features for m in sac.actor if isinstance(m, nn.Linear)] == [32, 32, 2]


def test_a_family_default_network_keeps_what_the_job_leaves_out():
    """Hopper's default widths stay when a job sets only the activation."""
    model = build("ppo", "Hopper-v5", {"model": {"activation": "elu"}})
    assert (model.spec.hidden, model.spec.activation, model.spec.normalize_obs) == \
        ((256, 256), "elu", True)
    assert [type(m) for m in model.actor] == [nn.Linear, nn.ELU, nn.Linear, nn.ELU, nn.Linear]


@pytest.mark.parametrize("name", ["ppo", "impact"])
def test_a_shared_mlp_trunk_feeds_both_heads(name: str):
    model = build(name, "CartPole-v1", {"model": {"hidden": [32, 16], "activation": "silu",
                                                  "shared_trunk": True}})
    assert isinstance(model, ActorCritic) and model.spec.shared_trunk
    assert [type(m) for m in model.trunk] == [nn.Flatten, nn.Linear, nn.SiLU, nn.Linear,
                                              nn.SiLU]
    assert (model.actor.in_features, model.critic.in_features) == (16, 16)
    obs = torch.randn(5, 4)
    assert model.get_action_and_value(obs)[3].shape == (5,)


@pytest.mark.parametrize("name", ["ppo", "impact"])
def test_a_continuous_policy_starts_at_the_jobs_log_std(name: str):
    """SB3's ``log_std_init``: the Normal's initial spread; the default keeps a std of 1."""
    assert build(name, "Pendulum-v1").log_std.tolist() == [0.0]
    model = build(name, "Hopper-v5", {"model": {"log_std_init": -2.0}})
    assert model.log_std.tolist() == [-2.0] * 3
    assert model.get_action_and_value(torch.zeros(1, 11))[0].shape == (1, 3)


def test_the_optimizers_eps_is_the_configs():
    for name, env_id, eps in (("ppo", "CartPole-v1", 1e-5), ("impact", "CartPole-v1", 1e-5),
                              ("dqn", "CartPole-v1", 1.5e-4), ("sac", "Pendulum-v1", 1e-8)):
        module, model = algorithm(name), build(name, env_id)
        cfg = JobSpec.model_validate({"algorithm": name, "env_id": env_id}).hyperparameters
        assert cfg.adam_eps == eps
        optimizer = module.make_optimizer(model, cfg.model_copy(update={"adam_eps": 0.125}))
        groups = getattr(optimizer, "critic", optimizer).param_groups
        assert [g["eps"] for g in groups] == [0.125]


def test_a_cnn_needs_images_it_fits():
    images, small = ((4, 84, 84), "uint8"), ((3, 20, 20), "uint8")
    assert trunk(ActorCriticModelSpec(), *images) == "nature"
    assert trunk(ActorCriticModelSpec(), *small) is None  # auto: too small for nature
    assert trunk(ActorCriticModelSpec(), (4,), "float32") is None
    for model, obs, field in ((ActorCriticModelSpec(cnn="nature"), ((4,), "float32"), "cnn"),
                              (ActorCriticModelSpec(cnn="nature"), small, "cnn"),
                              (ActorCriticModelSpec(shared_trunk=False), images,
                               "shared_trunk")):
        with pytest.raises(NetworkError) as err:
            trunk(model, *obs)
        assert err.value.field == field


def test_a_policy_spec_of_before_means_the_network_of_before():
    """Specs stored before activation and shared_trunk existed: tanh MLPs one per head, or a
    shared CNN trunk with a ReLU layer."""
    mlp = {"obs_shape": [4], "obs_dtype": "float32", "action_kind": "discrete",
           "action_dim": 2, "arch": "mlp", "hidden": [64, 64], "normalize_obs": False}
    cnn = {**mlp, "obs_shape": [4, 84, 84], "obs_dtype": "uint8", "arch": "cnn",
           "hidden": [512]}
    for stored, want in ((mlp, ("tanh", False)), (cnn, ("relu", True))):
        spec = PolicySpec.from_dict(stored)
        assert (spec.activation, spec.shared_trunk) == want
        assert PolicySpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_the_impala_cnn_is_three_residual_stacks(name: str):
    """16, 32, 32 channels, each stack halving the frame (84 -> 42 -> 21 -> 11)."""
    model = build(name, "ALE/Pong-v5", {"model": {"cnn": "impala", "hidden": [256]}})
    assert (model.spec.arch, model.spec.cnn, model.spec.hidden) == ("impala", "impala", (256,))
    trunk_ = model.trunk if isinstance(model, ActorCritic) else model.online.trunk
    convs = trunk_[0]
    assert [m.out_channels for m in convs if isinstance(m, nn.Conv2d)] == [16, 32, 32]
    assert sum(isinstance(m, Residual) for m in convs) == 6
    assert trunk_[1].in_features == 32 * 11 * 11
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    out = model.get_value(frames) if isinstance(model, ActorCritic) else model.online(frames)
    assert out.shape[0] == 3 and torch.isfinite(out).all()
    assert trunk(ActorCriticModelSpec(cnn="impala"), (3, 10, 10), "uint8") == "impala"
