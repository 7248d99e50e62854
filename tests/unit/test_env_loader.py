"""Envs from users' code: an archive unpacked once per process and imported, the entry point
made into an env with the platform's preprocessing, and every failure naming its stage."""

from __future__ import annotations

import io
import sys
import threading
import zipfile

import numpy as np
import pytest
import torch
from helpers import CORRIDOR_DIR

from faasrl.algorithms import algorithm, ppo
from faasrl.code_archive import digest, pack
from faasrl.env_code import EnvCode
from faasrl.rl.env_loader import EnvError, ensure, install
from faasrl.rl.envs import describe, make_env, make_vec_env
from faasrl.rl.policy import ActorCritic, policy_spec_for, policy_spec_from
from faasrl.rl.rollout import Rollout, evaluate

ARCHIVE = pack(CORRIDOR_DIR)
SHA = digest(ARCHIVE)


def code(entry_point: str | None = "corridor:Corridor", **kw) -> EnvCode:
    return EnvCode(code_sha256=SHA, entry_point=entry_point, **kw)


def test_an_archive_is_unpacked_once_and_put_first_on_the_path(env_loader):
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(install(ARCHIVE, SHA)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(folders)) == 1
    (folder,) = set(folders)
    assert folder.is_relative_to(env_loader) and (folder / "corridor.py").is_file()
    assert sys.path[0] == str(folder) and sys.path.count(str(folder)) == 1
    assert len(list(env_loader.rglob("corridor.py"))) == 1


def test_ensure_reads_the_archive_only_the_first_time(env_loader):
    reads = []

    def fetch() -> bytes:
        reads.append(1)
        return ARCHIVE

    for _ in range(3):
        ensure(code(), fetch)
    ensure(None, fetch)  # a registered id: nothing to read
    assert len(reads) == 1
    with pytest.raises(EnvError, match="not in Redis") as missing:
        ensure(EnvCode(code_sha256="0" * 64, entry_point="a:B"), lambda: None)
    assert missing.value.stage == "code"


@pytest.mark.parametrize(("data", "sha", "message"), [
    (ARCHIVE, "f" * 64, "not the job's"),
    (b"not a zip", None, "not a zip archive"),
])
def test_a_bad_archive_fails_at_the_code_stage(env_loader, data, sha, message):
    with pytest.raises(EnvError, match=message) as err:
        install(data, sha)
    assert err.value.stage == "code"


def test_an_unsafe_archive_is_refused_before_it_is_unpacked(env_loader):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../escape.py", "x = 1")
    with pytest.raises(EnvError, match="outside its folder"):
        install(buf.getvalue())
    assert not list(env_loader.parent.rglob("escape.py"))


def test_the_entry_point_is_called_with_kwargs_and_cut_at_max_episode_steps(env_loader):
    install(ARCHIVE, SHA)
    env = make_env("corridor", code(kwargs={"length": 30}, max_episode_steps=5))
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.length == 30 and obs.shape == (1,)
    for t in range(5):
        _, _, terminated, truncated, _ = env.step(1)
        assert not terminated and truncated == (t == 4)


def test_imports_register_an_id_gymnasium_then_makes(env_loader):
    install(ARCHIVE, SHA)
    env = make_env("MyCorridor-v0", code(None, imports=["corridor"], max_episode_steps=7))
    assert type(env.unwrapped).__name__ == "Corridor" and env.spec.max_episode_steps == 7


@pytest.mark.filterwarnings("ignore:.*Overriding environment MyCorridor-v0")
def test_two_archives_with_a_module_of_the_same_name_each_import_their_own(env_loader,
                                                                          tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "corridor.py").write_text(
        (CORRIDOR_DIR / "corridor.py").read_text().replace("length: int = 8", "length: int = 3"))
    second = pack(other)
    install(ARCHIVE, SHA)
    first = make_env("c", code())
    install(second)
    again = make_env("c", EnvCode(code_sha256=digest(second), entry_point="corridor:Corridor"))
    assert first.unwrapped.length == 8 and again.unwrapped.length == 3
    assert make_env("c", code()).unwrapped.length == 8
    numpy = sys.modules["numpy"]  # imported, not held by the archive: left as it is
    make_env("c", code(imports=["numpy"]))
    assert sys.modules["numpy"] is numpy


@pytest.mark.parametrize(("env", "stage", "message"), [
    (code("broken_import:Env"), "import", "this module cannot be imported"),
    (code("corridor:NoSuchEnv"), "import", "has no attribute 'NoSuchEnv'"),
    (code(kwargs={"width": 3}), "make", "unexpected keyword argument 'width'"),
    (code("misbehaving:not_an_env"), "make", "returned a str, not a gymnasium.Env"),
    (code("misbehaving:MultiDiscreteAction"), "spaces",
     r"MultiDiscrete\(\[2 2\]\) is not supported"),
    (EnvCode(code_sha256="0" * 64, entry_point="corridor:Corridor"), "code", "not installed"),
])
def test_a_failure_names_its_stage_and_the_env(env_loader, env, stage, message):
    install(ARCHIVE, SHA)
    with pytest.raises(EnvError, match=message) as err:
        make_env("custom", env)
    assert err.value.stage == stage
    assert str(err.value).startswith(f"env {env.entry_point!r} failed at {stage}: ")


def test_an_env_raising_mid_step_fails_the_rollout_naming_the_env_and_the_step(env_loader):
    install(ARCHIVE, SHA)
    env = code("misbehaving:RaisesMidStep", kwargs={"after": 4})
    envs = make_vec_env("custom", 2, seed=0, env=env)
    rollout = Rollout(envs, ActorCritic(policy_spec_for("custom", env)), num_steps=8,
                      gamma=0.99, seed=0)
    with pytest.raises(EnvError, match="RaisesMidStep: step 4 went wrong") as err:
        rollout.collect()
    assert err.value.stage == "step" and err.value.env == "misbehaving:RaisesMidStep"
    with pytest.raises(EnvError, match="no reset today") as at_reset:
        make_vec_env("custom", 1, seed=0, env=code("misbehaving:RaisesAtReset"))
    assert at_reset.value.stage == "reset"


def test_a_truncated_episode_is_truncated_not_terminated_and_is_bootstrapped(env_loader):
    """An episode cut by max_episode_steps ends with the value of its final observation added
    (gamma * V), as gymnasium defines truncation; one that reaches the goal does not."""
    install(ARCHIVE, SHA)
    env = code(kwargs={"length": 50}, max_episode_steps=4)
    policy = ActorCritic(policy_spec_for("custom", env))
    with torch.no_grad():
        policy.critic[-1].bias.fill_(10.0)  # V = 10 (+ small) everywhere: visible in rewards
    rollout = Rollout(make_vec_env("custom", 1, seed=0, env=env), policy, num_steps=8,
                      gamma=0.5, seed=0)
    steps, episodes = rollout.collect()
    assert [length for _, length in episodes] == [4, 4]
    ends = steps.ends[:, 0]
    assert ends.tolist() == [False, False, False, True] * 2
    assert (steps.rewards[ends, 0] > 4).all()  # -0.01 + 0.5 * V(final)
    assert np.allclose(steps.rewards[~ends, 0], -0.01)


def test_dict_observations_are_flattened_and_recorded(env_loader):
    install(ARCHIVE, SHA)
    description = describe("custom", code("misbehaving:DictObs"))
    assert description.obs_shape == [3] and description.obs_space.startswith("Dict(")
    assert description.preprocessing["wrappers"] == [{"name": "FlattenObservation",
                                                      "kwargs": {}}]
    assert policy_spec_from(description).arch == "mlp"
    returns = evaluate(ActorCritic(policy_spec_from(description)), "custom",
                       code("misbehaving:DictObs", max_episode_steps=6), episodes=2, seed=0)
    assert len(returns) == 2


def test_channels_last_frames_are_transposed_and_take_the_cnn(env_loader):
    install(ARCHIVE, SHA)
    env = code("misbehaving:Frames")
    description = describe("custom", env)
    assert description.family == "other" and description.obs_dtype == "uint8"
    assert description.obs_shape == [3, 48, 48]
    assert description.preprocessing["wrappers"] == [
        {"name": "TransposeObservation", "kwargs": {"axes": [2, 0, 1]}}]
    spec = algorithm("ppo").make_model(policy_spec_from(description), ppo.Config()).spec
    assert spec.arch == "cnn"  # model.cnn auto: the Nature CNN takes 48x48 frames
    obs, _ = make_env("custom", env).reset(seed=0)
    assert obs.shape == (3, 48, 48) and obs[0, :, 0].all() and not obs[1:].any()
    assert ActorCritic(spec).get_value(torch.as_tensor(obs)[None]).shape == (1,)


def test_a_registered_id_is_described_as_before(env_loader):
    """Built-in ids keep their family, spaces and wrappers."""
    pendulum = describe("Pendulum-v1")
    assert (pendulum.family, pendulum.obs_shape, pendulum.action_kind) == \
        ("classic", [3], "continuous")
    assert pendulum.preprocessing["wrappers"] == [{"name": "ClipAction", "kwargs": {}}]
    assert policy_spec_from(pendulum) == policy_spec_for("Pendulum-v1")
    assert "code" not in pendulum.preprocessing
