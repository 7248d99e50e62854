"""Model files describe themselves: the README's loader, run where faasrl cannot be imported
(plain torch, safetensors, gymnasium), picks the same actions as faasrl's own policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import torch
from helpers import REPO, finished

from faasrl.client import Client
from faasrl.data.codec import decode_tensors, encode_tensors
from faasrl.rl.model_card import FORMAT, model_card
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for

PLATFORM = {"register_builtins": True}
STEPS = 40  # observations per env the loader plays and records
MARKER = "<!-- model-loader -->"
# Before the loader: faasrl must not be importable, whatever the venv's editable install says.
WITHOUT_FAASRL = """
import sys
sys.path = [p for p in sys.path if not (p and __import__("os").path.isdir(p + "/faasrl"))]
sys.modules["faasrl"] = None  # 'import faasrl' now raises ImportError
"""
# After it: play each file's env with its policy, record observations and actions.
PLAY = """
import ale_py
import safetensors.numpy
gym.register_envs(ale_py)
for path, out in zip(sys.argv[1::2], sys.argv[2::2]):
    act, meta = load_policy(path)
    env = make_env(meta["env"])
    assert list(env.observation_space.shape) == meta["observation"]["shape"], meta
    obs, _ = env.reset(seed=0)
    seen, actions = [], []
    for _ in range(STEPS):
        action = act(obs)
        seen.append(np.asarray(obs))
        actions.append(np.asarray(action, dtype=np.float64))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    safetensors.numpy.save_file({"obs": np.stack(seen), "actions": np.stack(actions)}, out)
assert not [m for m, v in sys.modules.items() if m.startswith("faasrl") and v is not None]
"""


def readme_loader() -> str:
    """The loader exactly as the README shows it: the first code block after the marker."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(MARKER):].split("```python\n", 1)[1]
    return block.split("```", 1)[0]


def play_without_faasrl(files: list[Path], tmp_path: Path) -> list[dict[str, np.ndarray]]:
    """Run the README's loader on each file in a fresh interpreter that cannot import faasrl."""
    script = tmp_path / "play.py"
    script.write_text(WITHOUT_FAASRL + readme_loader() + f"\nSTEPS = {STEPS}\n" + PLAY)
    outs = [tmp_path / f"played-{i}.safetensors" for i in range(len(files))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = [str(a) for pair in zip(files, outs, strict=True) for a in pair]
    done = subprocess.run([sys.executable, "-I", str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return [safetensors.numpy.load_file(out) for out in outs]


def faasrl_actions(model: ActorCritic, obs: np.ndarray) -> np.ndarray:
    """faasrl's deterministic actions, one observation at a time as its evaluation plays them;
    continuous ones clipped to the bounds, as the env's ClipAction does."""
    spec = model.spec
    out = []
    with torch.no_grad():
        for o in obs:
            x = torch.from_numpy(np.asarray(o, dtype=spec.obs_dtype)[None])
            a = model.act(x, deterministic=True)[0].numpy().astype(np.float64)
            if spec.action_kind == "continuous":
                a = np.clip(a, spec.action_low, spec.action_high)
            out.append(a)
    return np.stack(out)


def assert_same_actions(model: ActorCritic, played: dict[str, np.ndarray]) -> None:
    expected = faasrl_actions(model, played["obs"])
    if model.spec.action_kind == "discrete":
        assert played["actions"].tolist() == expected.tolist()
    else:
        np.testing.assert_allclose(played["actions"], expected, rtol=0, atol=1e-6)
    assert len(np.unique(played["actions"], axis=0)) > 1  # a constant policy proves little


def test_the_readme_loader_reproduces_faasrl_policies_without_faasrl(tmp_path: Path):
    models, files = [], []
    for i, env_id in enumerate(("CartPole-v1", "Pendulum-v1", "Hopper-v5", "ALE/Pong-v5")):
        spec = policy_spec_for(env_id)
        torch.manual_seed(i)
        model = ActorCritic(spec)
        with torch.no_grad():  # heads big enough that actions differ from state to state
            for head in model.actor.modules() if spec.arch == "mlp" else [model.actor]:
                if isinstance(head, torch.nn.Linear):
                    head.weight.mul_(100.0)
        if spec.normalize_obs:  # statistics far from the (0, 1) defaults
            model.update_obs_stats(torch.randn(500, *spec.obs_shape) * 3.0 + 1.5)
        path = tmp_path / f"{i}.safetensors"
        path.write_bytes(encode_tensors(model.state_dict(), metadata={
            **model_card(model, spec, env_id=env_id, algorithm="ppo"), "version": "0"}))
        models.append(model)
        files.append(path)
    for model, played in zip(models, play_without_faasrl(files, tmp_path), strict=True):
        assert_same_actions(model, played)


def test_a_jobs_downloaded_model_describes_itself_and_plays_without_faasrl(
        client: Client, tmp_path: Path):
    job = client.submit({"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
                         "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 2}})
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    blob = client.model(job["id"])
    weights, meta = decode_tensors(blob)
    assert (meta["format"], meta["algorithm"], meta["env_id"], meta["version"]) == \
        (FORMAT, "ppo", "CartPole-v1", "2")
    assert json.loads(meta["action_space"]) == {"type": "discrete", "n": 2}
    arch = json.loads(meta["architecture"])
    assert [(x["op"], x.get("in"), x.get("out")) for x in arch["actor"]] == [
        ("linear", 4, 64), ("tanh", None, None), ("linear", 64, 64), ("tanh", None, None),
        ("linear", 64, 2)]
    model = ActorCritic(PolicySpec.from_dict(json.loads(meta["policy"])))
    model.load_state_dict(weights)
    path = tmp_path / "job.safetensors"
    path.write_bytes(blob)
    (played,) = play_without_faasrl([path], tmp_path)
    expected = faasrl_actions(model, played["obs"])
    assert played["actions"].tolist() == expected.tolist()


@pytest.mark.parametrize("algorithm", ["dqn", "sac"])
def test_off_policy_models_name_their_layers(algorithm: str):
    from faasrl.algorithms import ALGORITHMS

    module = ALGORITHMS[algorithm]
    env_id = "CartPole-v1" if algorithm == "dqn" else "Pendulum-v1"
    spec = policy_spec_for(env_id)
    model = module.make_model(spec, module.Config())
    card = model_card(model, spec, env_id=env_id, algorithm=algorithm)
    layers = json.loads(card["architecture"])["layers"]
    named = {x["weight"] for x in layers if "weight" in x}
    assert named and named <= set(model.state_dict())
    assert json.loads(card["env"])["id"] == env_id and card["algorithm"] == algorithm
