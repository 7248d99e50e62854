"""Model files describe themselves: the example loader (examples/load_model.py), run where
faasrl cannot be imported (plain torch, safetensors, gymnasium), gives the same actions and
values as faasrl's own models, for every algorithm's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy
import torch
from helpers import CORRIDOR_DIR, REPO, spread, succeeded

from faasrl.algorithms import algorithm
from faasrl.client import Client
from faasrl.code_archive import digest, pack
from faasrl.data.codec import decode_tensors, encode_tensors
from faasrl.env_code import EnvCode
from faasrl.jobs.spec import JobSpec
from faasrl.rl.env_loader import install
from faasrl.rl.envs import describe
from faasrl.rl.model_card import FORMAT, model_card
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for, policy_spec_from

PLATFORM = {"register_builtins": True}
STEPS = 40  # observations per env the loader plays and records
LOADER = REPO / "examples" / "load_model.py"
# Before the loader: faasrl must not be importable, whatever the venv's editable install says.
WITHOUT_FAASRL = """
import os, sys
sys.path = [p for p in sys.path if not (p and os.path.isdir(p + "/faasrl"))]
sys.modules["faasrl"] = None  # 'import faasrl' now raises ImportError
"""
# Then: play each file's env with the loader's policy, record observations, actions and values.
PLAY = """
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors.numpy
from load_model import load_model, load_policy, make_env
for path, out in zip(sys.argv[2::2], sys.argv[3::2]):
    act, meta = load_policy(path)
    forward, _ = load_model(path)
    env = make_env(meta["env"])
    assert list(env.observation_space.shape) == meta["observation"]["shape"], meta
    obs, _ = env.reset(seed=0)
    seen, actions, values = [], [], []
    for _ in range(STEPS):
        action = act(obs)
        seen.append(np.asarray(obs))
        actions.append(np.asarray(action, dtype=np.float64))
        values.append(forward(obs)[meta["architecture"]["value"]].numpy())
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    safetensors.numpy.save_file({"obs": np.stack(seen), "actions": np.stack(actions),
                                 "values": np.stack(values)}, out)
assert not [m for m, v in sys.modules.items() if m.startswith("faasrl") and v is not None]
"""


def play_without_faasrl(files: list[Path], tmp_path: Path, code_dir: Path | None = None
                        ) -> list[dict[str, np.ndarray]]:
    """Run the example loader on each file in a fresh interpreter that cannot import faasrl
    (``code_dir``: the files' env code, put on its path)."""
    script = tmp_path / "play.py"
    code = f"sys.path.insert(0, {str(code_dir)!r})\n" if code_dir else ""
    script.write_text(WITHOUT_FAASRL + code + f"STEPS = {STEPS}\n" + PLAY)
    outs = [tmp_path / f"played-{i}.safetensors" for i in range(len(files))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = [str(a) for pair in zip(files, outs, strict=True) for a in pair]
    done = subprocess.run([sys.executable, "-I", str(script), str(LOADER.parent), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return [safetensors.numpy.load_file(out) for out in outs]


def faasrl_outputs(name: str, model: torch.nn.Module, spec: PolicySpec, obs: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """faasrl's (deterministic actions, values), one observation at a time as its evaluation
    plays them: the actor-critic's mode (continuous ones clipped to the bounds, as the env's
    ClipAction does) and V(s); DQN's greedy action and Q(s, ·); SAC's tanh(mean) in the
    action box and Q1 at it."""
    module, actions, values = algorithm(name), [], []
    with torch.no_grad():
        for o in obs:
            x = torch.from_numpy(np.asarray(o, dtype=spec.obs_dtype)[None])
            if isinstance(model, ActorCritic):
                a = model.act(x, deterministic=True)
                if spec.action_kind == "continuous":
                    a = a.clamp(torch.tensor(spec.action_low), torch.tensor(spec.action_high))
                v = model.get_value(x)
            else:
                a = module.act(model, x, module.Config(), slot=0, actors=1, generator=None,
                               explore=False)
                v = model.online(x) if name == "dqn" else model.q1(x, model.mode(x))
            actions.append(a[0].numpy().astype(np.float64))
            values.append(v[0].numpy())
    return np.stack(actions), np.stack(values)


def assert_same_outputs(name: str, model: torch.nn.Module, spec: PolicySpec,
                        played: dict[str, np.ndarray]) -> None:
    actions, values = faasrl_outputs(name, model, spec, played["obs"])
    if spec.action_kind == "discrete":
        assert played["actions"].tolist() == actions.tolist()
    else:
        np.testing.assert_allclose(played["actions"], actions, rtol=0, atol=1e-6)
    np.testing.assert_allclose(played["values"].reshape(values.shape), values,
                               rtol=1e-5, atol=1e-5)
    assert len(np.unique(played["values"], axis=0)) > 1  # a constant network proves little


def make_model(name: str, env_id: str, hyperparameters: dict[str, Any] | None = None
               ) -> torch.nn.Module:
    """The model a job's learner builds (functions/learner/handler.py: init): the job spec's
    Config, with its env family's defaults."""
    cfg = JobSpec.model_validate({"algorithm": name, "env_id": env_id,
                                  "hyperparameters": hyperparameters or {}}).hyperparameters
    return algorithm(name).make_model(policy_spec_for(env_id), cfg)


def network(hidden: list[int], activation: str, **more: Any) -> dict[str, Any]:
    return {"model": {"hidden": hidden, "activation": activation, **more}}


# Seeded by their index: seeds whose untrained heads act differently from state to state.
# The default networks (DQN's on Pong as one width of before: one 256-wide layer after the
# CNN), then others a job's model section asks for.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("ppo", "CartPole-v1", {}), ("ppo", "Pendulum-v1", {}), ("ppo", "Hopper-v5", {}),
    ("ppo", "ALE/Pong-v5", {}), ("dqn", "ALE/Pong-v5", {"hidden": 256}),
    ("dqn", "CartPole-v1", {}),
    ("sac", "Pendulum-v1", {}), ("sac", "Hopper-v5", {}),
    ("ppo", "CartPole-v1", network([32, 16], "elu")),
    ("ppo", "Hopper-v5", network([32, 16], "gelu", shared_trunk=True)),
    ("dqn", "CartPole-v1", network([32, 16], "elu")),
    ("impact", "CartPole-v1", network([32, 16], "leaky_relu", shared_trunk=True)),
    ("ppo", "ALE/Pong-v5", network([64, 32], "silu")),
    ("dqn", "ALE/Pong-v5", network([64], "tanh")),
    ("sac", "Pendulum-v1", network([32, 16], "silu")),
    ("ppo", "ALE/Pong-v5", {"model": {"hidden": [64], "activation": "relu", "cnn": "impala"}}),
    ("dqn", "ALE/Pong-v5", {"model": {"hidden": [64], "activation": "relu", "cnn": "impala"}}),
]


def test_the_loader_reproduces_every_algorithms_models_without_faasrl(tmp_path: Path):
    models, files = [], []
    for i, (name, env_id, hyperparameters) in enumerate(CASES):
        torch.manual_seed(i)
        model = make_model(name, env_id, hyperparameters)
        spec = model.spec
        if "model" in hyperparameters:  # the network asked for is built, and the card says so
            network = json.loads(model_card(model, env_id=env_id, algorithm=name)
                                 ["architecture"])["network"]
            assert {k: network[k] for k in hyperparameters["model"]} == \
                hyperparameters["model"]
        spread(model)
        if spec.normalize_obs and isinstance(model, ActorCritic):  # far from (0, 1) defaults
            model.update_obs_stats(torch.randn(500, *spec.obs_shape) * 3.0 + 1.5)
        path = tmp_path / f"{i}.safetensors"
        path.write_bytes(encode_tensors(model.state_dict(), metadata={
            **model_card(model, env_id=env_id, algorithm=name), "version": "0"}))
        models.append((name, model, spec, "model" in hyperparameters and spec.arch != "mlp"))
        files.append(path)
    for (name, model, spec, frames), played in zip(models, play_without_faasrl(files, tmp_path),
                                                   strict=True):
        assert_same_outputs(name, model, spec, played)  # values differ from state to state
        # Pong's first frames barely change: only the default CNNs' seeds found actions that do.
        assert frames or len(np.unique(played["actions"], axis=0)) > 1, (name, spec)


# Envs brought as code: the corridor's, flattened (Dict) and transposed (frames) observations;
# with seeds whose untrained heads walk the corridor (PPO's zero biases stay put at cell 0).
CODE_CASES = [("dqn", "corridor:Corridor", 5), ("ppo", "misbehaving:DictObs", 2),
              ("ppo", "misbehaving:Frames", 0)]


def test_the_loader_plays_envs_brought_as_code_from_their_card(env_loader, tmp_path: Path):
    """A card names the env's code and the wrappers the probe saw applied: the loader, with
    the env's folder on its path, rebuilds the env and the model as faasrl has them."""
    archive = pack(CORRIDOR_DIR)
    install(archive)
    models, files = [], []
    for i, (name, entry_point, seed) in enumerate(CODE_CASES):
        env = EnvCode(code_sha256=digest(archive), entry_point=entry_point,
                      max_episode_steps=10)
        description = describe("custom", env)
        cfg = JobSpec.model_validate({"algorithm": name, "env": env.model_dump()}).hyperparameters
        torch.manual_seed(seed)
        model = algorithm(name).make_model(policy_spec_from(description), cfg)
        spread(model)
        path = tmp_path / f"{i}.safetensors"
        path.write_bytes(encode_tensors(model.state_dict(), metadata={
            **model_card(model, env_id="custom", algorithm=name, env=env,
                         description=description), "version": "0"}))
        models.append((name, model, model.spec))
        files.append(path)
    for (name, model, spec), played in zip(models, play_without_faasrl(files, tmp_path,
                                                                       CORRIDOR_DIR),
                                           strict=True):
        assert_same_outputs(name, model, spec, played)


OFF_POLICY = {"learning_starts": 64, "batch_size": 32}
JOBS: dict[str, dict[str, Any]] = {
    "ppo": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32},
    "ppo-elu-shared": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
                       "hyperparameters": network([32, 16], "elu", shared_trunk=True)},
    "impact-gelu": {"algorithm": "impact", "env_id": "CartPole-v1", "envs_per_actor": 2,
                    "steps_per_actor": 32, "hyperparameters": network([32, 16], "gelu")},
    "dqn-elu": {"algorithm": "dqn", "env_id": "CartPole-v1", "steps_per_actor": 64,
                "hyperparameters": {**OFF_POLICY, **network([32, 16], "elu")}},
    "dqn-one-width": {"algorithm": "dqn", "env_id": "CartPole-v1", "steps_per_actor": 64,
                      "hyperparameters": {**OFF_POLICY, "hidden": 128}},
    "sac-silu": {"algorithm": "sac", "env_id": "Pendulum-v1", "steps_per_actor": 64,
                 "hyperparameters": {**OFF_POLICY, **network([32, 16], "silu")}},
}
# The network each job has: the classic-control default, or the job's (DQN's one width of
# before: two layers that wide).
NETWORK = {"ppo": ([64, 64], "tanh"), "ppo-elu-shared": ([32, 16], "elu"),
           "impact-gelu": ([32, 16], "gelu"), "dqn-elu": ([32, 16], "elu"),
           "dqn-one-width": ([128, 128], "relu"), "sac-silu": ([32, 16], "silu")}


@pytest.mark.parametrize("case", list(JOBS))
def test_a_jobs_downloaded_model_describes_itself_and_plays_without_faasrl(
        case: str, client: Client, tmp_path: Path):
    name = JOBS[case].get("algorithm", "ppo")
    job = client.submit({**JOBS[case], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 2}})
    done = succeeded(client, job["id"])
    blob = client.model(job["id"])
    weights, meta = decode_tensors(blob)
    assert (meta["format"], meta["algorithm"], meta["env_id"]) == \
        (FORMAT, name, JOBS[case]["env_id"])
    assert int(meta["version"]) > 0  # a version a learner (or parameter function) published
    policy = json.loads(meta["policy"])
    assert (policy["hidden"], policy["activation"]) == NETWORK[case]
    assert done["policy"] == policy  # the job's record says the network it trains
    network = json.loads(meta["architecture"])["network"]
    assert (network["hidden"], network["activation"], network["dueling"]) == \
        (*NETWORK[case], name == "dqn")
    linears = [x for step in json.loads(meta["architecture"])["forward"]
               for x in step.get("layers", []) if x["op"] == "linear"]
    assert {x["out"] for x in linears} >= set(NETWORK[case][0])
    assert {x["weight"] for x in linears} <= set(weights)
    model = make_model(name, JOBS[case]["env_id"], done["spec"]["hyperparameters"])
    assert model.spec.to_dict() == policy
    spec = model.spec
    model.load_state_dict(weights)
    path = tmp_path / "job.safetensors"
    path.write_bytes(blob)
    (played,) = play_without_faasrl([path], tmp_path)
    assert_same_outputs(name, model, spec, played)
