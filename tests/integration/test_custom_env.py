"""Environments as code through REST: uploaded, described by a probe in the actor function at
submit, trained on; an env that fails is a 422 naming the env and the stage, and the gateway
process never imports a user's module. Real gateway, function processes and Redis."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx
import pytest
from helpers import (
    LAYER_MODULE,
    LAYER_REQUIREMENT,
    REPO,
    at_round,
    finished,
    fn,
    gateway_up,
    succeeded,
    wait_for,
)

from faasrl import code_archive
from faasrl.client import Client, GatewayError
from faasrl.data.keys import ENV_DESCRIPTIONS, env_code_key
from faasrl.redis_server import free_port
from faasrl.user_input import load_yaml

EXAMPLE = REPO / "examples" / "custom-env"
TEST_ENVS = REPO / "tests" / "envs" / "corridor"
PROBE_TIMEOUT_S = 8.0
PLATFORM = {"register_builtins": True, "env_probe_timeout_s": PROBE_TIMEOUT_S}
SHORT = {"envs_per_actor": 2, "steps_per_actor": 32, "evaluation_episodes": 2,
         "controller": {"name": "fixed", "actors": 1}, "stop": {"max_rounds": 2}}
# Writes its process id to the folder named in marks.txt next to it, then is the corridor.
MARKED = """\
import os
from pathlib import Path

Path(Path(__file__).with_name("marks.txt").read_text(), str(os.getpid())).touch()

from corridor import Corridor  # noqa: E402
"""
# An env whose module needs a package the runtime lacks: its archive's requirements.txt asks for it.
NEEDS_PACKAGE = f"""\
from {LAYER_MODULE} import ANSWER

from corridor import Corridor


class Answered(Corridor):
    def __init__(self, **kwargs):
        assert ANSWER == 42, ANSWER  # the wheelhouse's 1.0
        super().__init__(**kwargs)
"""


def example_spec() -> dict:
    return load_yaml((EXAMPLE / "corridor.yaml").read_text())


def corridor(client: Client, entry_point: str = "corridor:Corridor", **env) -> dict:
    """A short job on the test envs' archive (uploaded once: it is content-addressed)."""
    return {**SHORT, "env": {"code_sha256": client.upload_code(TEST_ENVS),
                             "entry_point": entry_point, **env}}


def refusal(client: Client, spec: dict) -> GatewayError:
    with pytest.raises(GatewayError) as err:
        client.submit(spec)
    assert err.value.status == 422, err.value
    return err.value


def test_a_custom_env_job_runs_with_its_description_kept(client: Client, r):
    spec = example_spec()
    job = client.submit({**spec, **SHORT, "stop": {"max_rounds": 4}}, base=EXAMPLE)
    sent = job["spec"]["env"]
    assert sent["code_dir"] is None and len(sent["code_sha256"]) == 64
    assert job["spec"]["env_id"] == "corridor:Corridor"
    described = client.job(job["id"])["env_description"]
    assert described["obs_shape"] == [1] and described["action_kind"] == "discrete"
    assert described["action_dim"] == 2 and described["max_episode_steps"] == 50
    assert r.hlen(ENV_DESCRIPTIONS) == 1  # kept for the next submit, and the next gateway
    # The driver puts the archive under the job's keys, the only ones its functions reach,
    # and again after a Redis that lost it (as a restart without persistence does).
    key = env_code_key(job["id"])
    at_round(client, job["id"], 1)
    r.delete(key)
    wait_for(lambda: r.exists(key), timeout_s=60, what="the env's code put back")
    done = succeeded(client, job["id"])
    assert done["env_steps"] == 4 * 2 * 32
    assert r.get(key) == code_archive.pack(EXAMPLE / "env")
    client.delete_job(job["id"])
    assert not r.exists(env_code_key(job["id"]))


def test_envs_that_fail_are_422s_naming_the_env_and_the_stage(client: Client):
    """Each failure is the submit's answer; one that never returns is cut at the probe's time
    limit. The gateway goes on serving, and a good env submitted next runs."""
    failures = [("broken_import:Env", "import", "cannot be imported"),
                ("misbehaving:RaisesAtReset", "reset", "no reset today"),
                ("misbehaving:not_an_env", "make", "not a gymnasium.Env"),
                ("misbehaving:LoopsInReset", "reset", "timed out")]
    for entry_point, stage, says in failures:
        t0 = time.monotonic()
        err = refusal(client, corridor(client, entry_point))
        assert list(err.fields) == ["env"], err
        assert stage in err.fields["env"] and says in err.fields["env"], err
        if says == "timed out":  # the container is warm by now: the limit is the wait
            assert PROBE_TIMEOUT_S <= time.monotonic() - t0 < PROBE_TIMEOUT_S + 10
    assert client.health()
    job = client.submit(corridor(client))
    assert finished(client, job["id"])["status"] == "succeeded"


def test_what_the_gateway_checks_before_the_probe_names_the_field(client: Client, platform):
    spec = corridor(client)
    err = refusal(client, {**spec, "env": {**spec["env"], "code_sha256": "0" * 64}})
    assert err.fields == {"env.code_sha256": "no uploaded code archive has this digest "
                                             "(POST /v1/code)"}
    # A folder is the client's to upload: the gateway cannot read it.
    resp = httpx.post(f"{platform.url}/v1/jobs",
                      json={**spec, "env": {**spec["env"], "code_dir": str(EXAMPLE / "env")}})
    assert resp.status_code == 422, resp.text
    assert "faasrl submit" in resp.json()["error"]["fields"]["env.code_dir"]
    err = refusal(client, {**spec, "env": {"code_sha256": spec["env"]["code_sha256"],
                                           "imports": ["corridor"]}})
    assert "env.imports" in err.fields["env_id"]
    # An off-policy job checks the env's actions against its algorithm's, from the probe's
    # description: no env is built in the gateway.
    err = refusal(client, {**spec, "algorithm": "sac"})
    assert "discrete" in err.fields["algorithm"]


def test_an_env_module_that_registers_its_id(client: Client):
    job = client.submit({**SHORT, "env_id": "MyCorridor-v0", "env": {
        "code_sha256": client.upload_code(TEST_ENVS), "imports": ["corridor"]}})
    assert job["env_description"]["max_episode_steps"] == 50
    assert succeeded(client, job["id"])["round"] == 2


def test_the_client_uploads_code_dir_relative_to_the_spec(client: Client, tmp_path):
    with pytest.raises(ValueError, match=r"env\.code_dir"):
        client.submit(example_spec(), base=tmp_path)
    shutil.copytree(EXAMPLE, tmp_path / "mine")
    sent = client.upload_env(example_spec(), base=tmp_path / "mine")
    assert sent["env"]["code_sha256"] == client.upload_code(EXAMPLE / "env")
    assert "code_dir" not in sent["env"]


def test_the_gateway_process_never_imports_the_env_module(tmp_path: Path, platforms):
    """A module that marks each process importing it: the actors' processes do, the gateway
    (a real ``faasrl up`` process) never does, though it probed, ran and evaluated the job."""
    code, marks = tmp_path / "env", tmp_path / "marks"
    shutil.copytree(TEST_ENVS, code)
    marks.mkdir()
    (code / "marks.txt").write_text(str(marks))
    (code / "marked.py").write_text(MARKED)
    state, port, token = tmp_path / "state", free_port(), "env-token"
    proc = platforms.gateway(state, port, token)
    with gateway_up(f"http://127.0.0.1:{port}", token, proc) as client:
        job = client.submit({**SHORT, "env": {"code_sha256": client.upload_code(code),
                                              "entry_point": "marked:Corridor"}})
        assert succeeded(client, job["id"])["evaluation"]["episodes"] == 2
        actors = {c["pid"] for c in client.cluster()["functions"]["actor"]["containers"]}
    pids = {int(p.name) for p in marks.iterdir()}
    assert proc.pid not in pids, (proc.pid, pids)
    assert actors and actors <= pids, (actors, pids)  # every actor that rolled out imported it


@pytest.mark.slow
def test_ppo_learns_the_example_corridor(client: Client):
    """The example as a newcomer runs it: PPO reaches the target through the REST API."""
    job = client.submit(example_spec(), base=EXAMPLE)
    done = finished(client, job["id"], timeout_s=240)
    assert done["status"] == "succeeded", done
    assert done["stop_reason"].startswith("target reward reached"), done
    assert done["evaluation"]["mean"] >= 0.9, done["evaluation"]


def test_an_env_gets_the_packages_its_requirements_name(client: Client, pip_index: Path,
                                                        tmp_path: Path):
    """The archive's requirements.txt is installed at submit into the archive's layer (from a
    local wheelhouse: no network), which the probe and the job's actors import from; one pip
    cannot satisfy is a 422 naming env with pip's reason, before any probe."""
    src = tmp_path / "needs"
    shutil.copytree(TEST_ENVS, src)
    (src / "answered.py").write_text(NEEDS_PACKAGE)
    (src / "requirements.txt").write_text(f"{LAYER_REQUIREMENT}\n")
    spec = {**SHORT, "env": {"code_sha256": client.upload_code(src),
                             "entry_point": "answered:Answered"}}
    job = client.submit(spec)
    assert job["env_description"]["action_kind"] == "discrete"
    assert succeeded(client, job["id"])["round"] == 2
    (src / "requirements.txt").write_text("faasrl-no-such-package==1.0\n")
    err = refusal(client, {**spec, "env": {**spec["env"],
                                           "code_sha256": client.upload_code(src)}})
    assert list(err.fields) == ["env"], err
    assert "faasrl-no-such-package" in err.fields["env"], err


@pytest.mark.parametrize(("handler", "says"), [("fns:echo", "describe result"),
                                               ("fns:boom", "ValueError: bad value")])
def test_an_actor_function_that_cannot_describe_is_named(client: Client, handler: str,
                                                         says: str):
    """The probe asks the job's own actor function: one that answers no description (echo's
    args back) or raises on describe makes the submit a 422 on actor_function, not on the
    env, which may be fine."""
    client.deploy(fn("no-describe", handler=handler))
    err = refusal(client, {**SHORT, "env_id": "CartPole-v1", "actor_function": "no-describe"})
    assert list(err.fields) == ["actor_function"], err
    assert "cannot describe" in err.fields["actor_function"], err
    assert says in err.fields["actor_function"], err
