"""What a function can reach, from inside it (process backend, the embedded Redis): its own
job's keys and nothing else, no other container's runtime, none of the gateway's secrets; and
when the gateway is root, none of its files."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import redis
from helpers import TEST_FUNCTIONS, fn, runs_as

from faasrl.data import acl

TOKEN = "isolation-token"


@pytest.fixture
def gateway_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented way to start with a token, and credentials the gateway's boto3 uses."""
    monkeypatch.setenv("FAASRL_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "gateway-aws-secret")
    monkeypatch.setenv("AWS_CA_BUNDLE", "/etc/ssl/gateway-ca.pem")


def run_probe(platform, files: list[str] = ()) -> dict:
    with platform.client() as c:
        c.deploy(fn("probe", handler="fns:probe"))
        c.deploy(fn("other"))
        c.invoke("other", {})
        [container] = c.cluster()["functions"]["other"]["containers"]
        with redis.Redis.from_url(platform.redis_url) as admin:
            admin.set("faasrl:job:B:secret", "s")
        job = {"id": "A", "redis": acl.grant_new(platform.redis_url, "A")}
        rec = c.invoke("probe", {"job": job,
                                 "other_job": "B", "runtime": container["endpoint"],
                                 "files": list(files)})
    assert rec["status"] == "success", rec
    return rec["result"]


def test_a_function_reaches_its_jobs_keys_only_and_no_other_runtime(make_platform,
                                                                    gateway_secrets):
    platform = make_platform(redis_url=None)
    out = run_probe(platform)
    r = out["redis"]
    assert (r["auth"], r["own_set"], r["own_get"]) == ("+OK", "+OK", "1")
    for refused in ("other_get", "other_set", "functions_get", "functions_set", "scan",
                    "flushall"):
        assert r[refused].startswith("-NOPERM"), (refused, r[refused])
    assert r["no_credentials"].startswith("-NOAUTH")  # the URL it was given names no user
    with redis.Redis.from_url(platform.redis_url) as admin:
        assert admin.get("faasrl:job:B:secret") == b"s"
        assert b"probe" in admin.hgetall("faasrl:functions")
    assert out["runtime_run"] == 401  # another container's runtime refuses it
    assert not {"FAASRL_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_CA_BUNDLE"} & set(out["env"])
    assert out["home"] != os.environ.get("HOME") and "faasrl-" in out["home"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root gateway changes the functions' user")
def test_a_root_gateway_runs_functions_as_an_unprivileged_user(make_platform, gateway_secrets):
    # The project's interpreter may live where uid 10001 cannot go (a Python under /root, as
    # on our machines); the system's can serve the stdlib-only probe.
    python = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if python is None or not runs_as(10001, python, "-c", "pass"):
        pytest.skip("no Python here that uid 10001 can run")
    if not runs_as(10001, python, "-c", f"import os; os.listdir({str(TEST_FUNCTIONS)!r})"):
        pytest.skip(f"uid 10001 cannot read {TEST_FUNCTIONS} (the checkout's folder)")
    state = Path(tempfile.mkdtemp(prefix="faasrl-isolation-"))
    state.chmod(0o755)  # reachable, so the platform's own modes are what is tested
    try:
        platform = make_platform(redis_url=None, state_dir=state, function_python=python)
        secrets = [str(state / "gateway.json"), str(state / "redis" / "appendonly.aof"),
                   str(state / "platform.lock"), f"/proc/{os.getpid()}/environ"]
        out = run_probe(platform, secrets)
        assert out["uid"] == 10001
        assert set(out["files"].values()) == {"PermissionError"}, out["files"]
        assert out["redis"]["other_get"].startswith("-NOPERM")
    finally:
        shutil.rmtree(state, ignore_errors=True)
