"""The platform through its REST API: real runtime processes, real Redis, real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from helpers import REPO, fn, pid_alive, wait_for
from redis import exceptions as redis_errors
from redis.asyncio import Redis

from faasrl.client import Client, GatewayError
from faasrl.data.keys import job_key
from faasrl.gateway.errors import install_error_handlers
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord, JobStore
from faasrl.redis_server import EmbeddedRedis


def containers(client: Client, name: str) -> list[dict]:
    return client.cluster()["functions"].get(name, {"containers": []})["containers"]


def test_register_cold_then_warm(client: Client):
    client.deploy(fn("t"))
    cold = client.invoke("t", {"x": 1})
    assert cold["status"] == "success"
    assert cold["result"]["args"] == {"x": 1}
    assert cold["cold"] is True and cold["init_s"] > 0 and cold["attempts"] == 1
    assert cold["billed_ms"] >= 1 and cold["memory_mb"] == 256 and cold["backend"] == "process"
    warm = client.invoke("t", {"x": 2})
    assert warm["cold"] is False and warm["init_s"] == 0
    assert warm["result"]["pid"] == cold["result"]["pid"]
    assert warm["result"]["calls"] == 2  # module state survived: the container stayed warm


def test_builtin_echo_function_deploys_from_its_folder(client: Client):
    client.deploy(REPO / "functions" / "echo")
    out = client.invoke("echo", {"hello": "world"})
    assert out["status"] == "success" and out["result"]["echo"] == {"hello": "world"}


def test_keep_alive_reclaims_idle_containers(client: Client):
    client.deploy(fn("t", keep_alive_s=0.3))
    pid = client.invoke("t")["result"]["pid"]
    assert containers(client, "t")
    wait_for(lambda: not containers(client, "t"), what="keep-alive to reclaim the container")
    wait_for(lambda: not pid_alive(pid), what="the process to exit")
    assert client.invoke("t")["cold"] is True


def test_prewarm_makes_the_first_invocation_warm(client: Client):
    client.deploy(fn("t"))
    assert client.prewarm("t", 2) == {"started": 2, "containers": 2}
    wait_for(lambda: [c["state"] for c in containers(client, "t")] == ["idle", "idle"],
             what="pre-warmed containers")
    first = client.invoke("t")
    assert first["cold"] is False and first["billed_ms"] <= 50


def test_min_warm_containers_are_kept_started(client: Client):
    client.deploy(fn("t", min_warm=1, keep_alive_s=0))
    wait_for(lambda: [c["state"] for c in containers(client, "t")] == ["idle"],
             what="the min_warm container")
    assert client.invoke("t")["cold"] is False
    time.sleep(0.3)
    assert len(containers(client, "t")) == 1  # keep-alive 0 never goes below min_warm


def test_raising_handler_comes_back_structured_and_the_container_stays(client: Client):
    client.deploy(fn("t", handler="fns:boom"))
    out = client.invoke("t", {"v": 7})
    assert out["status"] == "error"
    assert out["error"]["type"] == "ValueError"
    assert out["error"]["message"] == "bad value: {'v': 7}"
    assert "fns.py" in out["error"]["traceback"]
    assert client.invoke("t")["cold"] is False


def test_timeout_kills_the_container(client: Client):
    client.deploy(fn("t", handler="fns:sleep", timeout_s=0.5))
    t0 = time.monotonic()
    out = client.invoke("t", {"s": 30})
    assert time.monotonic() - t0 < 5
    assert out["status"] == "timeout" and out["error"]["type"] == "Timeout"
    assert 0.5 <= out["run_s"] < 2
    wait_for(lambda: not containers(client, "t"), what="the timed-out container to go")
    assert client.invoke("t", {"s": 0})["status"] == "success"


def test_request_timeout_below_the_functions(client: Client):
    client.deploy(fn("t", handler="fns:sleep", timeout_s=60))
    assert client.invoke("t", {"s": 5}, timeout_s=0.3)["status"] == "timeout"


def test_container_killed_mid_invocation_is_retried_on_a_fresh_one(client: Client):
    client.deploy(fn("t", handler="fns:sleep"))
    iid = client.invoke_async("t", {"s": 1.0})
    busy = wait_for(lambda: [c for c in containers(client, "t") if c["state"] == "busy"],
                    what="the invocation to run")
    os.kill(busy[0]["pid"], signal.SIGKILL)
    out = client.wait(iid, timeout_s=20)
    assert out["status"] == "success" and out["attempts"] == 2
    assert out["result"]["pid"] != busy[0]["pid"]


def test_container_dying_twice_is_a_clear_error(client: Client):
    client.deploy(fn("t", handler="fns:crash"))
    out = client.invoke("t")
    assert out["status"] == "error" and out["attempts"] == 2
    assert out["error"]["type"] == "ContainerDied"


def test_container_dying_once_succeeds_on_retry(client: Client, tmp_path):
    client.deploy(fn("t", handler="fns:crash_first"))
    out = client.invoke("t", {"marker": str(tmp_path / "crashed-once")})
    assert out["status"] == "success" and out["attempts"] == 2


def test_broken_handler_fails_to_start_with_its_error(client: Client):
    client.deploy(fn("t", handler="broken:main"))
    out = client.invoke("t")
    assert out["status"] == "error" and out["error"]["type"] == "InitError"
    assert "broken on purpose" in out["error"]["message"]
    assert not containers(client, "t")


def test_handler_sees_its_context_and_environment(client: Client, platform):
    client.deploy(fn("t", handler="fns:context_info", memory_mb=300, timeout_s=9))
    out = client.invoke("t")
    info = out["result"]
    assert info["invocation_id"] == out["id"] and info["function"] == "t"
    assert info["memory_mb"] == 300 and 0 < info["remaining_ms"] <= 9000
    client.deploy(fn("e", handler="fns:env", env={"MY_SETTING": "42"}))
    env = client.invoke("e", ["MY_SETTING", "FAASRL_FUNCTION", "FAASRL_REDIS_URL"])["result"]
    assert env == {"MY_SETTING": "42", "FAASRL_FUNCTION": "e",
                   "FAASRL_REDIS_URL": platform.redis_url}


def test_memory_limit_applies(client: Client):
    client.deploy(fn("t", handler="fns:hog", memory_mb=128))
    out = client.invoke("t", {"mb": 1024})
    assert out["status"] == "error" and out["error"]["type"] == "MemoryError"
    assert client.invoke("t", {"mb": 16})["result"] == 16 * 1024 * 1024


def test_result_that_is_not_json_is_an_error(client: Client):
    client.deploy(fn("t", handler="fns:unserializable"))
    assert client.invoke("t")["error"]["type"] == "ResultError"


def test_max_concurrency_shares_a_container(client: Client):
    client.deploy(fn("t", handler="fns:sleep", max_concurrency=2))
    ids = [client.invoke_async("t", {"s": 0.5}) for _ in range(2)]
    pids = {client.wait(i)["result"]["pid"] for i in ids}
    assert len(pids) == 1


def test_affinity_keeps_a_key_on_its_container(client: Client):
    client.deploy(fn("t", handler="fns:sleep"))
    client.prewarm("t", 2)
    wait_for(lambda: sum(c["state"] == "idle" for c in containers(client, "t")) == 2,
             what="two idle containers")
    # One call at a time: most-recently-used alone would send every call to one container.
    pids = {key: client.invoke("t", {"s": 0}, affinity=key)["result"]["pid"] for key in "ab"}
    for key in "abba":
        assert client.invoke("t", {"s": 0}, affinity=key)["result"]["pid"] == pids[key]
    assert pids["a"] != pids["b"]
    resp = httpx.post(f"{client.url}/v1/functions/t/invoke", json={"affinity": ""})
    assert resp.status_code == 422 and "affinity" in resp.json()["error"]["fields"]


def test_queue_full_is_429_with_retry_after(make_platform):
    platform = make_platform(node_cpu=1, max_queue=1)
    with platform.client() as client:
        client.deploy(fn("t", handler="fns:sleep", cpu=1))
        client.invoke_async("t", {"s": 2})
        wait_for(lambda: containers(client, "t"), what="the first container")
        client.invoke_async("t", {"s": 0})  # queued
        wait_for(lambda: client.cluster()["functions"]["t"]["queued"] == 1, what="a queued one")
        resp = httpx.post(f"{platform.url}/v1/functions/t/invoke", json={"args": {"s": 0}})
    assert resp.status_code == 429 and resp.headers["retry-after"] == "1"
    assert resp.json()["error"]["type"] == "QueueFull"


def test_async_invocation_is_recorded_and_listed(client: Client):
    client.deploy(fn("t", handler="fns:sleep"))
    iid = client.invoke_async("t", {"s": 0.3})
    assert client.invocation(iid)["status"] in ("queued", "running")
    done = client.wait(iid)
    assert done["status"] == "success" and done["finished_at"] >= done["requested_at"]
    wait_for(lambda: iid in [r["id"] for r in client.invocations("t")], what="the listing")
    with pytest.raises(GatewayError) as err:
        client.invocation(uuid.uuid4().hex)
    assert err.value.status == 404


def test_function_update_and_delete(client: Client):
    client.deploy(fn("t", handler="fns:env", env={"V": "1"}))
    assert client.invoke("t", ["V"])["result"] == {"V": "1"}
    client.deploy(fn("t", handler="fns:env", env={"V": "2"}))
    assert client.invoke("t", ["V"])["result"] == {"V": "2"}  # never the old container
    client.delete("t")
    wait_for(lambda: "t" not in client.cluster()["functions"], what="containers to go")
    with pytest.raises(GatewayError) as err:
        client.invoke("t")
    assert err.value.status == 404 and err.value.kind == "FunctionNotFound"


def test_metrics(client: Client):
    client.deploy(fn("t"))
    client.invoke("t")
    client.invoke("t")
    text = client.metrics()
    assert 'faasrl_invocations_total{function="t",start="cold",status="success"} 1.0' in text
    assert 'faasrl_invocations_total{function="t",start="warm",status="success"} 1.0' in text
    assert 'faasrl_cold_starts_total{function="t"} 1.0' in text
    assert 'faasrl_containers{function="t",state="idle"} 1.0' in text
    assert "faasrl_invocation_run_seconds_bucket" in text


def test_auth_on(make_platform):
    platform = make_platform(token="s3cret")
    base = platform.url
    assert httpx.get(f"{base}/healthz").status_code == 200
    missing = httpx.get(f"{base}/v1/functions")
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["type"] == "Unauthorized"
    wrong = httpx.get(f"{base}/v1/functions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    for path in ("/v1/cluster", "/v1/invocations/x"):
        assert httpx.get(f"{base}{path}").status_code == 401
    assert httpx.post(f"{base}/v1/functions/t/invoke", json={}).status_code == 401
    with platform.client() as client:
        assert client.functions() == []


def test_auth_off(platform):
    assert httpx.get(f"{platform.url}/v1/functions").status_code == 200


@pytest.mark.parametrize(("body", "field"), [
    ({"handler": "fns:echo"}, "name"),
    ({"name": "t"}, "handler"),
    ({"name": "t", "handler": "no-colon"}, "handler"),
    ({"name": "t", "handler": "fns:echo", "cpu": -1}, "cpu"),
    ({"name": "t", "handler": "fns:echo", "memory_mb": "lots"}, "memory_mb"),
    ({"name": "t", "handler": "fns:echo", "timeout_s": 0}, "timeout_s"),
    ({"name": "t", "handler": "fns:echo", "env": {"1BAD": "x"}}, "env"),
    ({"name": "t", "handler": "fns:echo", "colour": "red"}, "colour"),
    ({"name": "bad name!", "handler": "fns:echo"}, "name"),
    ({"name": "t", "handler": "fns:echo", "cpu": 10_000}, "cpu"),
    ({"name": "t", "handler": "fns:echo", "code_dir": "/no/such/dir"}, "code_dir"),
    ({"name": "t", "handler": "fns:echo", "image": "xv"}, "image"),  # the process backend
])
def test_bad_manifest_is_422_naming_the_field(platform, body, field):
    resp = httpx.post(f"{platform.url}/v1/functions", json=body)
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["type"] == "ValidationError" and field in err["fields"], err


def test_bad_requests_are_4xx_never_500(client: Client, platform):
    base = platform.url
    client.deploy(fn("t"))
    assert httpx.post(f"{base}/v1/functions", json=fn("t")).status_code == 409
    put = httpx.put(f"{base}/v1/functions/other", json=fn("t"))
    assert put.status_code == 422 and "name" in put.json()["error"]["fields"]
    bad_timeout = httpx.post(f"{base}/v1/functions/t/invoke", json={"timeout_s": -1})
    assert bad_timeout.status_code == 422 and "timeout_s" in bad_timeout.json()["error"]["fields"]
    bad_mode = httpx.post(f"{base}/v1/functions/t/invoke?mode=later", json={})
    assert bad_mode.status_code == 422 and "mode" in bad_mode.json()["error"]["fields"]
    unknown = httpx.post(f"{base}/v1/functions/t/invoke", json={"argz": 1})
    assert unknown.status_code == 422 and "argz" in unknown.json()["error"]["fields"]
    assert httpx.post(f"{base}/v1/functions/nope/invoke", json={}).status_code == 404
    assert httpx.delete(f"{base}/v1/functions/nope").status_code == 404
    bad_prewarm = httpx.post(f"{base}/v1/functions/t/prewarm", json={"count": -1})
    assert bad_prewarm.status_code == 422 and "count" in bad_prewarm.json()["error"]["fields"]
    assert httpx.get(f"{base}/v1/invocations?limit=0").status_code == 422


def test_the_invoke_shortcut_answers_as_the_route_does(client: Client, platform):
    """A plain JSON sync invoke is answered by gateway/fast_invoke.py, one with another JSON
    content type by FastAPI's route: their answers and stored records must not differ."""
    client.deploy(fn("t"))
    url = f"{platform.url}/v1/functions/t/invoke"
    body = json.dumps({"args": {"x": 1}, "timeout_s": 30, "affinity": "k"})
    answers = [httpx.post(url + query, content=body, headers={"Content-Type": content_type})
               for query, content_type in (("", "application/json"),
                                           ("?mode=sync", "application/json"),
                                           ("", "application/json; charset=utf-8"))]
    assert [(r.status_code, r.headers["content-type"]) for r in answers] == \
        [(200, "application/json")] * 3
    records = [r.json() for r in answers]
    assert len({tuple(rec) for rec in records}) == 1  # the same fields, in the same order
    assert [(rec["status"], rec["result"]["args"]) for rec in records] == \
        [("success", {"x": 1})] * 3
    for rec in records:
        stored = wait_for(lambda rec=rec: httpx.get(f"{platform.url}/v1/invocations/{rec['id']}"),
                          what="the record")
        assert stored.status_code == 200
        assert stored.json() == rec  # InvocationOut shows every field of the record


def test_oversized_body_is_413(make_platform):
    platform = make_platform(max_payload_bytes=1000)
    with platform.client() as client:
        client.deploy(fn("t"))
    big = {"args": "x" * 2000}
    assert httpx.post(f"{platform.url}/v1/functions/t/invoke", json=big).status_code == 413

    def chunks():
        yield b'{"args": "'
        yield b"x" * 2000
        yield b'"}'

    chunked = httpx.post(f"{platform.url}/v1/functions/t/invoke", content=chunks(),
                         headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413
    small = httpx.post(f"{platform.url}/v1/functions/t/invoke", content=iter([b'{"args": 1}']),
                       headers={"Content-Type": "application/json"})
    assert small.status_code == 200 and small.json()["result"]["args"] == 1


def test_restart_keeps_registrations(make_platform):
    first = make_platform()
    with first.client() as client:
        client.deploy(fn("t", env={"V": "kept"}))
        pid = client.invoke("t")["result"]["pid"]
    first.stop()
    assert not pid_alive(pid)  # stopping the gateway stopped its containers
    second = make_platform()
    with second.client() as client:
        assert [f["name"] for f in client.functions()] == ["t"]
        assert client.function("t")["env"] == {"V": "kept"}
        assert client.invoke("t")["status"] == "success"


def test_cluster_view(client: Client, platform):
    client.deploy(fn("t", cpu=0.5, memory_mb=200))
    client.invoke("t")
    view = client.cluster()
    assert view["backend"] == "process"
    assert view["zygote"] in ("importing", "ready")  # the process backend's default: on
    wait_for(lambda: client.cluster()["zygote"] == "ready", what="the zygote's imports",
             timeout_s=120)
    assert view["reserved"] == {"cpu": 0.0, "memory_mb": 200, "gpus": 0}  # idle: no cores
    (c,) = view["functions"]["t"]["containers"]
    assert c["state"] == "idle" and c["served"] == 1 and pid_alive(c["pid"])
    assert c["memory_mb"] > 1 and c["endpoint"].startswith("127.0.0.1:")


# Every route with a path parameter, with a value its pattern refuses, and the parameter's name.
BAD_PATH_PARAMETERS = [
    ("GET", "/v1/functions/{name}", "bad.name", "name"),
    ("PUT", "/v1/functions/{name}", "bad.name", "name"),
    ("DELETE", "/v1/functions/{name}", "bad.name", "name"),
    ("POST", "/v1/functions/{name}/invoke", "bad.name", "name"),
    ("POST", "/v1/functions/{name}/prewarm", "-starts-with-a-dash", "name"),
    ("GET", "/v1/functions/{name}/stats", "bad.name", "name"),
    ("GET", "/v1/functions/{name}/dead-letters", "bad.name", "name"),
    ("POST", "/v1/functions/{name}/dead-letters/redrive", "bad.name", "name"),
    ("DELETE", "/v1/functions/{name}/dead-letters/{letter_id}", "bad.name", "name"),
    ("DELETE", "/v1/functions/{name}/dead-letters/{letter_id}", "not-an-id", "letter_id"),
    ("GET", "/v1/functions/{name}/logs", "bad.name", "name"),
    ("POST", "/v1/functions/{name}/versions", "bad.name", "name"),
    ("GET", "/v1/functions/{name}/versions", "bad.name", "name"),
    ("DELETE", "/v1/functions/{name}/versions/{version}", "0", "version"),
    ("GET", "/v1/functions/{name}/aliases", "bad.name", "name"),
    ("PUT", "/v1/functions/{name}/aliases/{alias}", "123", "alias"),
    ("GET", "/v1/functions/{name}/aliases/{alias}", "bad.alias", "alias"),
    ("DELETE", "/v1/functions/{name}/aliases/{alias}", "x" * 129, "alias"),
    ("GET", "/v1/invocations/{invocation_id}", "no-such-id", "invocation_id"),
    ("GET", "/v1/invocations/{invocation_id}/logs", "no-such-id", "invocation_id"),
    ("GET", "/v1/jobs/{job_id}", "abc.def", "job_id"),
    ("DELETE", "/v1/jobs/{job_id}", "abc.def", "job_id"),
    ("GET", "/v1/jobs/{job_id}/metrics", "abc.def", "job_id"),
    ("GET", "/v1/jobs/{job_id}/model", "a" * 65, "job_id"),
    ("GET", "/v1/jobs/{job_id}/events", "abc~", "job_id"),
    ("GET", "/v1/jobs/{job_id}/logs", "abc.def", "job_id"),
    ("POST", "/v1/jobs/{job_id}/cancel", "abc.def", "job_id"),
    ("POST", "/v1/jobs/{job_id}/resume", "é", "job_id"),
    ("POST", "/v1/jobs/{job_id}/serve", "abc.def", "job_id"),
    ("GET", "/v1/jobs/{job_id}/videos", "abc.def", "job_id"),
    ("GET", "/v1/jobs/{job_id}/videos/{n}", "-1", "n"),
    ("POST", "/v1/jobs/{job_id}/play", "abc.def", "job_id"),
    ("GET", "/v1/namespaces/{namespace}", "Lab_A", "namespace"),
    ("DELETE", "/v1/namespaces/{namespace}", "lab.a", "namespace"),
    ("PUT", "/v1/namespaces/{namespace}/quota", "-lab", "namespace"),
    ("PATCH", "/v1/namespaces/{namespace}/quota", "x" * 33, "namespace"),
    ("POST", "/v1/namespaces/{namespace}/keys", "LAB", "namespace"),
    ("GET", "/v1/namespaces/{namespace}/keys", "lab_a", "namespace"),
    ("DELETE", "/v1/namespaces/{namespace}/keys/{key_id}", "frl_0123", "key_id"),
]
# A body each route takes (the others: {} to POST, PUT and PATCH, none to the rest).
BODIES = {("PUT", "/v1/functions/{name}"): {"handler": "fns:echo"},
          ("PUT", "/v1/functions/{name}/aliases/{alias}"): {"version": 1},
          ("POST", "/v1/functions/{name}/prewarm"): {"count": 1}}


def test_bad_path_parameters_are_422_naming_them(platform):
    doc = httpx.get(f"{platform.url}/openapi.json").json()
    with_parameters = {(method.upper(), path) for path, ops in doc["paths"].items()
                       if path.startswith("/v1/") and "{" in path for method in ops}
    assert with_parameters == {(m, p) for m, p, _, _ in BAD_PATH_PARAMETERS}  # none left out
    valid = {"namespace": "default", "key_id": "0" * 12, "name": "t",  # a route's others
             "letter_id": "0" * 32, "alias": "live", "version": "1", "job_id": "abc",
             "n": "0"}
    with httpx.Client(base_url=platform.url) as http:
        for method, template, value, name in BAD_PATH_PARAMETERS:
            op = doc["paths"][template][method.lower()]
            params = {p["name"]: p for p in op["parameters"] if p["in"] == "path"}
            assert all(p["schema"].get("pattern") or p["schema"]["type"] == "integer"
                       for p in params.values()), (method, template)
            assert name in params, (method, template)
            path = template.replace("{" + name + "}", value).format(**valid)
            body = BODIES.get((method, template),
                              {} if method in ("POST", "PUT", "PATCH") else None)
            resp = http.request(method, path, json=body)
            assert resp.status_code == 422, (method, path, resp.text)
            assert list(resp.json()["error"]["fields"]) == [name], (method, path, resp.text)


def test_well_formed_unknown_ids_are_404(platform):
    base = platform.url
    assert httpx.get(f"{base}/v1/jobs/abc-def_1").status_code == 404
    assert httpx.get(f"{base}/v1/invocations/{uuid.uuid4().hex}").status_code == 404
    assert httpx.get(f"{base}/v1/functions/no-such_fn").status_code == 404


def test_malformed_json_is_400_with_the_parse_error(platform):
    for body, needle in ((b'{"args": 1,}', "character 11"), (b'{"a": "\xc3\x28"}', "utf-8")):
        resp = httpx.post(f"{platform.url}/v1/jobs", content=body,
                          headers={"Content-Type": "application/json"})
        assert resp.status_code == 400, resp.text
        err = resp.json()["error"]
        assert err["type"] == "InvalidJSON" and needle in err["message"] and "fields" not in err


@pytest.mark.parametrize(("body", "field"), [
    ('{"env_id": "CartPole-v1", "stop": {"target_reward": NaN}}', "stop.target_reward"),
    ('{"env_id": "CartPole-v1", "stop": {"max_wall_s": Infinity}}', "stop.max_wall_s"),
    ('{"env_id": "CartPole-v1", "pricing": {"lambda_gb_s": -Infinity}}', "pricing.lambda_gb_s"),
    ('{"env_id": "CartPole-v1", "seed": true}', "seed"),
    ('{"env_id": "CartPole-v1", "envs_per_actor": "4"}', "envs_per_actor"),
    ('{"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 2.0}}',
     "controller.fixed.actors"),
])
def test_job_specs_refuse_non_finite_and_loose_numbers(platform, body, field):
    resp = httpx.post(f"{platform.url}/v1/jobs", content=body,
                      headers={"Content-Type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert field in resp.json()["error"]["fields"]


def test_request_bodies_take_strict_numbers(client: Client, platform):
    client.deploy(fn("t"))
    base = platform.url
    for count in (False, True, "1", 1.5):
        resp = httpx.post(f"{base}/v1/functions/t/prewarm", json={"count": count})
        assert resp.status_code == 422 and "count" in resp.json()["error"]["fields"], count
    # JSON Schema's integer: a whole number written as a float is one.
    whole = httpx.post(f"{base}/v1/functions/t/prewarm", content=b'{"count": 1.0}',
                       headers={"Content-Type": "application/json"})
    assert whole.status_code == 200 and whole.json()["containers"] == 1, whole.text
    for timeout in (True, "1"):
        resp = httpx.post(f"{base}/v1/functions/t/invoke", json={"timeout_s": timeout})
        assert resp.status_code == 422 and "timeout_s" in resp.json()["error"]["fields"]
    nan = httpx.post(f"{base}/v1/functions/t/invoke", content=b'{"timeout_s": NaN}',
                     headers={"Content-Type": "application/json"})
    assert nan.status_code == 422 and "timeout_s" in nan.json()["error"]["fields"]
    for field, value in (("memory_mb", True), ("cpu", "1"), ("timeout_s", float("inf")),
                         ("min_warm", 1.0)):
        resp = httpx.put(f"{base}/v1/functions/t", content=json.dumps(fn("t", **{field: value})),
                         headers={"Content-Type": "application/json"})
        assert resp.status_code == 422 and field in resp.json()["error"]["fields"], field
    assert httpx.post(f"{base}/v1/functions/t/invoke", json={"timeout_s": 5}).status_code == 200


def test_put_takes_its_name_from_the_path(platform):
    base = platform.url
    body = {k: v for k, v in fn("t").items() if k != "name"}
    created = httpx.put(f"{base}/v1/functions/t", json=body)
    assert created.status_code == 201 and created.json()["name"] == "t"
    assert httpx.put(f"{base}/v1/functions/t", json={**body, "name": "t"}).status_code == 200
    other = httpx.put(f"{base}/v1/functions/t", json={**body, "name": "u"})
    assert other.status_code == 422 and list(other.json()["error"]["fields"]) == ["name"]
    assert [f["name"] for f in httpx.get(f"{base}/v1/functions").json()] == ["t"]


def test_405_allows_every_method_of_the_path(platform):
    base = platform.url
    for method, path, allowed in (
            ("PATCH", "/v1/functions/t", "DELETE, GET, HEAD, PUT"),
            ("OPTIONS", "/v1/functions", "GET, HEAD, POST"),
            ("PUT", "/v1/jobs", "GET, HEAD, POST"),
            ("POST", "/v1/jobs/abc", "DELETE, GET, HEAD"),
            ("GET", "/v1/jobs/abc/cancel", "POST"),
            ("DELETE", "/v1/functions/t/dead-letters/redrive", "POST")):  # not a letter's id
        resp = httpx.request(method, f"{base}{path}")
        assert resp.status_code == 405 and resp.headers["allow"] == allowed, (method, path)
        assert resp.json()["error"]["type"] == "MethodNotAllowed"


def test_openapi_documents_the_answers_routes_give(platform):
    doc = httpx.get(f"{platform.url}/openapi.json").json()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    # Generators name classes by title: one schema per title, each algorithm's its own.
    titles = [s.get("title", name) for name, s in schemas.items()]
    assert len(titles) == len(set(titles)), sorted(titles)
    assert {"PPOConfig", "IMPACTConfig", "DQNConfig", "SACConfig"} <= set(titles)
    # What a job leaves out takes its algorithm's defaults: only the env is required.
    assert schemas["JobSpec"]["required"] == ["env_id"]
    assert "default: ppo: classic 4" in schemas["JobSpec"]["properties"]["envs_per_actor"][
        "description"]
    put = paths["/v1/functions/{name}"]["put"]
    assert {"200", "201", "400", "422", "503"} <= set(put["responses"])
    body = put["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("/FunctionUpdate")
    for method, path in (("post", "/v1/functions"), ("post", "/v1/functions/{name}/invoke"),
                         ("post", "/v1/functions/{name}/prewarm"), ("post", "/v1/jobs")):
        assert {"400", "413"} <= set(paths[path][method]["responses"]), (method, path)
    for method, path in (("get", "/v1/jobs/{job_id}"), ("get", "/v1/jobs/{job_id}/events"),
                         ("post", "/v1/jobs"), ("get", "/v1/invocations/{invocation_id}"),
                         ("post", "/v1/code"), ("post", "/v1/functions")):
        unavailable = paths[path][method]["responses"]["503"]
        assert "Retry-After" in unavailable["headers"], (method, path)
    assert {"200", "201"} <= set(paths["/v1/code"]["post"]["responses"])
    assert "application/octet-stream" in paths["/v1/code"]["post"]["requestBody"]["content"]
    # A client reading the first media type it knows must not JSON-decode the CSV.
    metrics = paths["/v1/jobs/{job_id}/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/csv", "application/json"]
    # A refused field is answered as ErrorOut (errors.py), never FastAPI's own body.
    for path, ops in paths.items():
        for method, op in ops.items():
            if path.startswith("/v1/") and "422" in op["responses"]:
                schema = op["responses"]["422"]["content"]["application/json"]["schema"]
                assert schema["$ref"].endswith("/ErrorOut"), (method, path)


def _sse(resp: httpx.Response) -> Iterator[dict[str, str]]:
    """The events of a server-sent event stream, each as its fields."""
    event: dict[str, str] = {}
    for line in resp.iter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(":")
            event[key] = value.removeprefix(" ")


async def _seed_job(url: str, job_id: str, rows: range, status: str) -> None:
    """A job record and metrics rows (appended to the job's list, as its driver does)."""
    redis = Redis.from_url(url)
    try:
        for k in rows:
            await redis.rpush(job_key(job_id, "metrics"), json.dumps({"round": k}))
        await JobStore(redis).save(JobRecord(
            id=job_id, spec=JobSpec(env_id="CartPole-v1"), status=status, round=rows.stop,
            created_at=time.time()))
    finally:
        await redis.aclose()


@pytest.fixture
def own_redis(tmp_path) -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own, to stop and start again (set up before the platform, so
    stopped after it)."""
    server = EmbeddedRedis(tmp_path / "own-redis").start()
    yield server
    server.stop()


def test_redis_unreachable_is_503_and_event_streams_resume(own_redis, make_platform):
    platform = make_platform(redis_url=own_redis.url)
    base, job = platform.url, "job-1"
    asyncio.run(_seed_job(own_redis.url, job, range(3), "running"))
    with httpx.stream("GET", f"{base}/v1/jobs/{job}/events", timeout=20) as resp:
        events = _sse(resp)
        rounds = [next(events) for _ in range(3)]
        assert [(e["id"], e["event"]) for e in rounds] == [("0", "round"), ("1", "round"),
                                                           ("2", "round")]
        own_redis.stop()
        rest = list(events)  # the stream ends after its error event
    assert [e["event"] for e in rest] == ["error"] and "id" not in rest[0]
    assert int(rest[0]["retry"]) > 0
    assert json.loads(rest[0]["data"])["error"]["type"] == "RedisUnavailable"

    with httpx.Client(base_url=base) as http:
        for method, path in (("GET", f"/v1/jobs/{job}"), ("GET", f"/v1/jobs/{job}/events"),
                             ("GET", "/v1/jobs"), ("POST", f"/v1/jobs/{job}/cancel"),
                             ("GET", f"/v1/invocations/{uuid.uuid4().hex}"),
                             ("POST", "/v1/functions")):
            resp = http.request(method, path, json=fn("t") if path == "/v1/functions" else None)
            assert resp.status_code == 503, (method, path, resp.text)
            assert int(resp.headers["retry-after"]) > 0
            assert resp.json()["error"]["type"] == "RedisUnavailable", resp.text
        assert http.get("/healthz").status_code == 503

    own_redis.start()  # same port and data: the job and its rows are back
    asyncio.run(_seed_job(own_redis.url, job, range(3, 5), "succeeded"))  # two rows more
    with httpx.stream("GET", f"{base}/v1/jobs/{job}/events", timeout=20,
                      headers={"Last-Event-ID": rounds[-1]["id"]}) as resp:
        resumed = list(_sse(resp))
    assert [(e.get("id"), e["event"]) for e in resumed] == [("3", "round"), ("4", "round"),
                                                            (None, "end")]
    assert [json.loads(e["data"])["round"] for e in resumed[:2]] == [3, 4]


def test_a_null_last_event_id_is_no_last_event_id(platform, redis_url):
    """A client with no event yet may send ``Last-Event-ID: null`` (or empty): the stream then
    starts at the first row; a malformed id is still a 422 naming the header."""
    job = "job-1"
    asyncio.run(_seed_job(redis_url, job, range(2), "succeeded"))
    for last in ("null", ""):
        with httpx.stream("GET", f"{platform.url}/v1/jobs/{job}/events", timeout=20,
                          headers={"Last-Event-ID": last}) as resp:
            assert resp.status_code == 200, last
            assert [(e.get("id"), e["event"]) for e in _sse(resp)] == [
                ("0", "round"), ("1", "round"), (None, "end")], last
    bad = httpx.get(f"{platform.url}/v1/jobs/{job}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 422 and "last-event-id" in bad.json()["error"]["fields"], bad.text


def _failing_app(exc: Exception) -> FastAPI:
    """An app with the gateway's error handlers and one route that raises ``exc``."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/redis")
    async def fail() -> None:
        raise exc

    return app


async def _get(app: FastAPI, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        return await http.get(path)


@pytest.mark.parametrize("exc", [redis_errors.ConnectionError("Connection refused"),
                                 redis_errors.TimeoutError("Timeout reading from socket"),
                                 redis_errors.BusyLoadingError("Redis is loading the dataset")])
def test_every_redis_outage_error_is_a_503(exc):
    """The test above stops Redis (a ConnectionError); a hung or loading one raises the others."""
    resp = asyncio.run(_get(_failing_app(exc), "/redis"))
    assert resp.status_code == 503 and int(resp.headers["retry-after"]) > 0
    assert resp.json()["error"]["type"] == "RedisUnavailable"
    assert type(exc).__name__ in resp.json()["error"]["message"]


def test_a_refused_redis_command_stays_a_500():
    """A refused command (wrong type, bad argument) is a bug to fix, not an outage to wait out."""
    exc = redis_errors.ResponseError("WRONGTYPE Operation against a key")
    assert asyncio.run(_get(_failing_app(exc), "/redis")).status_code == 500
