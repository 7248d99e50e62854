"""Namespaces and API keys through a real gateway: the gateway's token creates namespaces and
keys, each key acts in its own namespace only (another's answers 404, what its role may not do
403), revoked and malformed keys are refused at once, a key is shown once, its last use kept;
and the ``faasrl namespaces`` / ``faasrl keys`` commands end to end."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
from helpers import cli_output, fn, seed_job
from redis.asyncio import Redis

from faasrl.client import Client, GatewayError
from faasrl.data.keys import API_KEYS, spend_key
from faasrl.embedded import EmbeddedPlatform
from faasrl.gateway.keys import KeyStore, sigv4_secret
from faasrl.gateway.services.namespaces import write_key_use

TOKEN = "namespaces-test-token"
PLATFORM = {"token": TOKEN}  # conftest's platform
KEY = re.compile(r"frl_[0-9a-f]{12}_\S+")


def as_key(platform: EmbeddedPlatform, key: str) -> Client:
    return Client(platform.url, key)


def status_of(call: Callable[[], Any]) -> int:
    try:
        call()
    except GatewayError as exc:
        return exc.status
    return 200


def test_the_token_creates_namespaces_and_keys_that_act_in_their_own(
        platform: EmbeddedPlatform, client: Client) -> None:
    lab = client.create_namespace("lab-a", {"jobs": 2, "spend_usd_per_day": 5.0})
    assert lab["quota"]["jobs"] == 2 and lab["quota"]["cores"] is None
    assert lab["usage"] == {"cores": 0.0, "memory_mb": 0, "gpus": 0, "containers": 0,
                            "jobs": 0, "spend_usd_per_day": 0.0}
    client.create_namespace("lab-b")
    with pytest.raises(GatewayError) as exc:
        client.create_namespace("lab-a")
    assert exc.value.status == 409
    for bad, field in (({"name": "Lab_A"}, "name"), ({"name": "x" * 40}, "name"),
                       ({"name": "lab-c", "quota": {"cores": -1}}, "quota.cores"),
                       ({"name": "lab-c", "quota": {"disk": 1}}, "quota.disk"),
                       ({"name": "lab-c", "quota": {"jobs": "2"}}, "quota.jobs"),
                       ({"name": "lab-c", "quota": {"cores": True}}, "quota.cores"),
                       ({"name": 7}, "name")):
        resp = httpx.post(f"{platform.url}/v1/namespaces", json=bad,
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert resp.status_code == 422 and field in resp.json()["error"]["fields"], resp.text
    assert status_of(lambda: client.create_key("lab-a", role="owner")) == 422

    keys = {role: client.create_key("lab-a", role=role, name=f"{role} key")
            for role in ("read", "write", "admin")}
    other = client.create_key("lab-b", role="admin")
    for role, made in keys.items():
        assert KEY.fullmatch(made["key"]) and made["key"].startswith(f"frl_{made['id']}_")
        assert made["lambda_api"] == {"access_key_id": made["id"],
                                      "secret_access_key": sigv4_secret(TOKEN, made["id"])}
        with as_key(platform, made["key"]) as c:
            assert c.whoami() == {"namespace": "lab-a", "role": role, "key_id": made["id"],
                                  "root": False}
            # Its own namespace, and no other.
            assert [ns["name"] for ns in c.namespaces()] == ["lab-a"]
            assert c.namespace("lab-a")["quota"]["jobs"] == 2
            for call in (lambda c=c: c.namespace("lab-b"), lambda c=c: c.keys("lab-b"),
                         lambda c=c: c.namespace("nowhere")):
                assert status_of(call) == 404
            # Root's operations: refused, 403 on its own namespace, 404 on another's.
            if role != "read":  # a read key is refused any change first (403)
                assert status_of(lambda c=c: c.create_key("lab-b")) == 404
                assert status_of(lambda c=c: c.revoke_key("lab-b", other["id"])) == 404
                assert status_of(lambda c=c: c.set_quota("lab-b", {"jobs": 9})) == 404
                assert status_of(lambda c=c: c.delete_namespace("lab-b")) == 404
            assert status_of(lambda c=c: c.create_namespace("mine")) == 403
            assert status_of(lambda c=c: c.set_quota("lab-a", {"jobs": 9})) == 403
            assert status_of(lambda c=c: c.delete_namespace("lab-a")) == 403
            # Its keys: the admin key's to manage.
            expected = 200 if role == "admin" else 403
            assert status_of(lambda c=c: c.keys("lab-a")) == expected
            assert status_of(lambda c=c: c.create_key("lab-a", "read")) in (
                {"admin": 200, "write": 403, "read": 403}[role],)
    # A key of lab-b cannot be revoked through lab-a's path, even by root.
    assert status_of(lambda: client.revoke_key("lab-a", other["id"])) == 404

    # A key is shown once: listed, it is neither there nor its hash.
    listed = httpx.get(f"{platform.url}/v1/namespaces/lab-a/keys",
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert listed.status_code == 200
    for made in keys.values():
        secret = made["key"].split("_", 2)[2]  # the secret may itself hold "_"
        assert secret not in listed.text and made["key"] not in listed.text
    assert all(set(k) == {"id", "namespace", "role", "name", "created_at", "last_used_at",
                          "revoked_at"} for k in listed.json())
    assert {k["name"] for k in listed.json()} >= {"read key", "write key", "admin key"}

    # Root changes quotas: PATCH keeps the limits not given, PUT replaces the quota whole.
    assert client.set_quota("lab-a", {"cores": 2.5})["quota"] == {
        "cores": 2.5, "memory_mb": None, "gpus": None, "containers": None, "jobs": 2,
        "spend_usd_per_day": 5.0}
    assert client.set_quota("lab-a", {"jobs": None})["quota"]["jobs"] is None
    assert client.set_quota("lab-a", {"gpus": 1}, replace=True)["quota"] == {
        "cores": None, "memory_mb": None, "gpus": 1, "containers": None, "jobs": None,
        "spend_usd_per_day": None}
    assert status_of(lambda: client.set_quota("lab-a", {"gpus": -1})) == 422
    assert {ns["name"] for ns in client.namespaces()} == {"default", "lab-a", "lab-b"}
    assert client.whoami() == {"namespace": "default", "role": "admin", "key_id": None,
                               "root": True}


def test_revoked_and_malformed_keys_are_refused_at_once(platform: EmbeddedPlatform,
                                                        client: Client) -> None:
    client.create_namespace("lab-a")
    made = client.create_key("lab-a", "write")
    key = made["key"]
    url = platform.url
    ok = httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {key}"})
    assert ok.status_code == 200
    client.revoke_key("lab-a", made["id"])
    wrong_secret = key[:len("frl_") + 13] + "x" * 32
    for value in (key, wrong_secret, "frl_zz", "frl_0123456789ab_nope", "not-a-key"):
        headers = {"Authorization": f"Bearer {value}"}
        assert httpx.get(f"{url}/v1/whoami", headers=headers).status_code == 401, value
        # The invocation fast path checks keys too.
        resp = httpx.post(f"{url}/v1/functions/any/invoke", json={}, headers=headers)
        assert resp.status_code == 401, value
    listed = {k["id"]: k for k in client.keys("lab-a")}
    assert listed[made["id"]]["revoked_at"] is not None
    assert client.revoke_key("lab-a", made["id"])["revoked_at"] == \
        listed[made["id"]]["revoked_at"]  # again: nothing changes


def test_a_keys_last_use_is_listed_and_outlives_a_restart(
        make_platform: Callable[..., EmbeddedPlatform]) -> None:
    platform = make_platform(token=TOKEN)
    with platform.client() as root:
        root.create_namespace("lab-a")
        made = root.create_key("lab-a", "read")
        assert root.keys("lab-a")[0]["last_used_at"] is None
        before = time.time()
        with as_key(platform, made["key"]) as c:
            c.whoami()
        used = root.keys("lab-a")[0]["last_used_at"]
        assert used is not None and used >= before - 1
    platform.stop()  # writes the last uses on its way out
    again = make_platform(token=TOKEN)
    with again.client() as root:
        assert root.keys("lab-a")[0]["last_used_at"] == pytest.approx(used, abs=1e-3)


def test_the_gateway_task_writes_last_uses_while_it_runs(redis_url: str) -> None:
    async def stored_use() -> float | None:
        r = Redis.from_url(redis_url)
        keys = KeyStore(r)
        await keys.load()
        record, key = await keys.create_key("default", "read")
        assert keys.principal(key) is not None  # a use, noted in memory only
        task = asyncio.create_task(write_key_use(keys, every_s=0.05))
        try:
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                used = json.loads(await r.hget(API_KEYS, record.id))["last_used_at"]
                if used is not None:
                    return used
                await asyncio.sleep(0.02)
            return None
        finally:
            task.cancel()
            await r.aclose()

    assert asyncio.run(stored_use()) is not None


def test_usage_spend_and_deletion(platform: EmbeddedPlatform, client: Client,
                                  r: redis.Redis) -> None:
    client.create_namespace("lab-a", {"jobs": 1})
    key = client.create_key("lab-a", "admin")["key"]
    now = time.time()
    seed_job(r, "lab-a-running", "lab-a", "running", 0.25)
    seed_job(r, "lab-a-today", "lab-a", "succeeded", 0.5, finished_at=now - 3600)
    seed_job(r, "lab-a-last-week", "lab-a", "succeeded", 10.0, finished_at=now - 7 * 86400)
    seed_job(r, "default-job", "default", "running", 3.0)
    # What the spend quota counts: each round's price, when it ran (jobs/admission.py)
    r.zadd(spend_key("lab-a"), {"lab-a-running:3:0.25": now, "lab-a-today:9:0.5": now - 3600,
                                "lab-a-last-week:9:10.0": now - 7 * 86400})
    r.zadd(spend_key("default"), {"default-job:1:3.0": now})
    client.deploy(fn("greet", "fns:echo"))  # invocations outside jobs are not in the spend
    for i in range(3):
        client.invoke("greet", {"n": i})
    usage = client.namespace("lab-a")["usage"]
    assert usage["jobs"] == 1
    assert usage["spend_usd_per_day"] == pytest.approx(0.75)
    default = client.namespace("default")["usage"]
    assert default["spend_usd_per_day"] == pytest.approx(3.0)
    # greet's idle container counts for its namespace, without cores (invoker/quota.py)
    assert default["containers"] == 1 and default["cores"] == 0.0
    assert default["memory_mb"] == 256

    with pytest.raises(GatewayError) as exc:
        client.delete_namespace("default")
    assert exc.value.status == 409
    with pytest.raises(GatewayError) as exc:
        client.delete_namespace("lab-a")
    assert exc.value.status == 409 and "3 job(s)" in exc.value.message
    with as_key(platform, key) as c:  # a namespace's jobs are its own keys' to delete
        for job_id in ("lab-a-running", "lab-a-today", "lab-a-last-week"):
            c.delete_job(job_id)
    client.delete_namespace("lab-a")
    assert status_of(lambda: client.namespace("lab-a")) == 404
    with as_key(platform, key) as c:  # its keys went with it
        assert status_of(c.whoami) == 401


def cli(platform: EmbeddedPlatform, token: str, *args: str) -> str:
    return cli_output(platform.url, *args, token=token)


def test_the_namespaces_and_keys_commands(platform: EmbeddedPlatform, client: Client) -> None:
    out = cli(platform, TOKEN, "namespaces", "create", "lab-c", "--jobs", "3",
              "--spend-usd-per-day", "2.5", "--memory-mb", "4096")
    assert "created namespace lab-c" in out
    listed = cli(platform, TOKEN, "namespaces", "list")
    assert "default" in listed and "lab-c" in listed
    shown = cli(platform, TOKEN, "namespaces", "show", "lab-c")
    assert "0 / 3" in shown and "0 / 4096" in shown and "0.0000 / 2.50" in shown
    changed = cli(platform, TOKEN, "namespaces", "set-quota", "lab-c", "--jobs", "5",
                  "--no-limit", "spend_usd_per_day")
    assert "0 / 5" in changed and "0.0000 / no limit" in changed and "0 / 4096" in changed

    out = cli(platform, TOKEN, "keys", "create", "--namespace", "lab-c", "--role", "admin",
              "--name", "ci")
    key = KEY.search(out).group(0)
    key_id = key.split("_")[1]
    assert sigv4_secret(TOKEN, key_id) in out  # its Lambda API secret
    keys = cli(platform, TOKEN, "keys", "list", "--namespace", "lab-c")
    assert key_id in keys and "admin" in keys and "ci" in keys
    assert key.split("_", 2)[2] not in keys  # the whole secret; it may hold "_"
    assert "lab-c" in cli(platform, TOKEN, "keys", "list")  # every namespace's

    # The key goes where the token goes, and sees its own namespace only.
    mine = cli(platform, key, "namespaces", "list")
    assert "lab-c" in mine and "default" not in mine
    assert key_id in cli(platform, key, "keys", "list")

    def row() -> str:
        return next(line for line in cli(platform, TOKEN, "keys", "list", "--namespace",
                                         "lab-c").splitlines() if key_id in line)

    assert row().count("UTC") == 2  # created, last used; not revoked
    assert f"revoked key {key_id} of lab-c" in cli(platform, TOKEN, "keys", "revoke", key_id)
    assert row().count("UTC") == 3
    with as_key(platform, key) as c:
        assert status_of(c.whoami) == 401
    assert "deleted namespace lab-c" in cli(platform, TOKEN, "namespaces", "delete", "lab-c")
    assert "lab-c" not in cli(platform, TOKEN, "namespaces", "list")
