"""A model version as ONNX (``?format=onnx``, ``faasrl jobs export --onnx``): onnxruntime alone,
given the observations faasrl's evaluation sees, takes the actions faasrl's own deterministic
act takes, for every algorithm and network (the loader test's models), with the
preprocessing (running statistics, clip, pixel scale) inside the graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from helpers import succeeded
from redis import Redis
from test_model_file import CASES, OFF_POLICY, faasrl_outputs, make_model, spread

from faasrl.client import Client, GatewayError
from faasrl.data.codec import decode_tensors, encode_arrays
from faasrl.data.keys import params_key
from faasrl.data.params import ParameterStore
from faasrl.rl.envs import make_env
from faasrl.rl.model_card import RULES, model_card
from faasrl.rl.model_spec import ACTIVATIONS
from faasrl.rl.onnx_export import ACTIVATION_OPS, RULE_OPS, NotExportable, to_onnx
from faasrl.rl.policy import ActorCritic, PolicySpec

PLATFORM = {"register_builtins": True}
STEPS = 40  # observations per env, played with faasrl's own deterministic actions


def played(name: str, model: torch.nn.Module, env_id: str) -> np.ndarray:
    """Observations of ``env_id`` as faasrl's evaluation sees them (its env, its cast), the
    model acting deterministically."""
    spec, env = model.spec, make_env(env_id)
    obs, _ = env.reset(seed=0)
    seen = []
    for _ in range(STEPS):
        seen.append(np.asarray(obs, dtype=spec.obs_dtype))
        (action,), _ = faasrl_outputs(name, model, spec, seen[-1][None])
        step = int(action) if spec.action_kind == "discrete" else action.astype(np.float32)
        obs, _, terminated, truncated, _ = env.step(step)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(seen)


def run_onnx(model_bytes: bytes, obs: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"obs": obs}), strict=True))


def assert_acts_as_faasrl(name: str, model: torch.nn.Module, exported: bytes,
                          obs: np.ndarray) -> dict[str, np.ndarray]:
    """The exported graph on a batch of observations (and on one alone: the batch is
    dynamic) gives faasrl's actions and values, one observation at a time as it plays."""
    spec: PolicySpec = model.spec
    out = run_onnx(exported, obs)
    actions, values = faasrl_outputs(name, model, spec, obs)
    if spec.action_kind == "discrete":
        assert out["action"].dtype == np.int64
        assert out["action"].tolist() == actions.astype(np.int64).tolist()
    else:
        np.testing.assert_allclose(out["action"], actions, rtol=0, atol=1e-5)
    np.testing.assert_allclose(out["value"].reshape(values.shape), values, rtol=1e-5,
                               atol=1e-5)
    if isinstance(model, ActorCritic):  # the actor's head: logits, or the unclipped mean
        with torch.no_grad():
            head = model.actor(model.features(torch.from_numpy(obs))).numpy()
        key = "logits" if spec.action_kind == "discrete" else "mean"
        np.testing.assert_allclose(out[key], head, rtol=1e-5, atol=1e-5)
    alone = run_onnx(exported, obs[:1])["action"]
    np.testing.assert_allclose(alone, out["action"][:1], rtol=0, atol=1e-5)
    return out


def props(exported: bytes) -> dict[str, Any]:
    """The ONNX model's metadata_props, JSON values decoded."""
    meta = {p.key: p.value for p in onnx.load_from_string(exported).metadata_props}
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in meta.items()}


def test_every_card_op_has_its_onnx():
    """Each combination rule and layer op a card can name is translated (a new one fails
    here, not in a user's export)."""
    assert set(RULE_OPS) == set(RULES)
    assert set(ACTIVATION_OPS) == set(ACTIVATIONS) | {"flatten"}


@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{n}-{e}-{h.get('model', h)}" for n, e, h in CASES])
def test_every_algorithms_published_model_acts_in_onnxruntime_as_in_faasrl(case: int,
                                                                            r: Redis):
    """PPO (CartPole; Hopper with running statistics; Pong's stacked frames, Nature and IMPALA
    CNNs), IMPACT, DQN's dueling head, SAC's squashed actor, default and other networks:
    published as a job publishes a version, then exported."""
    name, env_id, hyperparameters = CASES[case]
    torch.manual_seed(case)
    model = make_model(name, env_id, hyperparameters)
    spread(model)
    spec = model.spec
    if spec.normalize_obs and isinstance(model, ActorCritic):  # far from (0, 1) defaults
        model.update_obs_stats(torch.randn(500, *spec.obs_shape) * 3.0 + 1.5)
    ParameterStore(r, "onnx-case").publish(
        3, model.state_dict(), model_card(model, env_id=env_id, algorithm=name))
    exported = to_onnx(r.get(params_key("onnx-case", 3)))
    obs = played(name, model, env_id)
    out = assert_acts_as_faasrl(name, model, exported, obs)
    if spec.arch == "mlp":  # Pong's first frames barely change what an untrained CNN does
        assert len(np.unique(out["action"], axis=0)) > 1
    meta = props(exported)
    assert (meta["algorithm"], meta["env_id"], meta["version"]) == (name, env_id, "3")
    assert (meta["observation"]["shape"], meta["observation"]["dtype"]) == \
        (list(spec.obs_shape), spec.obs_dtype)
    assert meta["preprocessing"] == meta["observation"]["input"]
    assert meta["action_space"]["type"] == ("discrete" if spec.action_kind == "discrete"
                                            else "box")
    assert meta["network"]["dueling"] == (name == "dqn")
    onnx.checker.check_model(onnx.load_from_string(exported), full_check=True)
    graph = onnx.load_from_string(exported).graph
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    if spec.normalize_obs:  # the running statistics are in the graph, by their names
        assert {"obs_mean", "obs_var"} <= {t.name for t in graph.initializer}


JOBS = {"ppo": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32},
        "dqn": {"algorithm": "dqn", "env_id": "CartPole-v1", "steps_per_actor": 64,
                "hyperparameters": OFF_POLICY}}


def cli(platform: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "faasrl", "--url", platform.url, "--token",
                           platform.token or "", "jobs", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", list(JOBS))
def test_a_jobs_version_exported_by_the_cli_acts_as_the_job_in_onnxruntime(
        name: str, client: Client, platform, tmp_path: Path):
    job = client.submit({**JOBS[name], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 2}})
    done = succeeded(client, job["id"])
    version = done["version"]
    path = tmp_path / "policy.onnx"
    ran = cli(platform, "export", job["id"], "--onnx", str(path), "--version", str(version))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"version {version}" in ran.stdout and str(path) in ran.stdout
    exported = path.read_bytes()
    assert exported == client.model(job["id"], version, "onnx")
    assert props(exported)["version"] == str(version)

    weights, _ = decode_tensors(client.model(job["id"], version))
    model = make_model(name, "CartPole-v1", done["spec"]["hyperparameters"])
    model.load_state_dict(weights)
    model.eval()
    assert_acts_as_faasrl(name, model, exported, played(name, model, "CartPole-v1"))

    missing = cli(platform, "export", job["id"], "--onnx", str(tmp_path / "x.onnx"),
                  "--version", str(version + 100))
    assert missing.returncode == 1 and "not kept" in missing.stdout, missing.stdout
    with pytest.raises(GatewayError) as err:
        client.model(job["id"], version + 100, "onnx")
    assert err.value.status == 404
    with pytest.raises(GatewayError) as err:
        client.model(job["id"], version, "tflite")
    assert (err.value.status, list(err.value.fields or {})) == (422, ["format"])


def test_a_file_without_a_forward_card_is_refused_saying_so():
    blob = encode_arrays({"w": np.zeros(2, np.float32)}, metadata={"format": "other"})
    with pytest.raises(NotExportable, match="forward card"):
        to_onnx(blob)
