"""Namespaces keep to themselves, on every route of the gateway's OpenAPI document.

One platform (auth on), two namespaces: A with a write key, B with an admin key (so that no
route refuses B for its role before it looks). A owns a function, an invocation of it, a code
archive and a job; B owns nothing. The walk sends every operation of
``/openapi.json`` (its path parameters filled with A's real ids) with A's key, B's key and the
root token (which acts in ``default``), and with B's key once more naming ids that do not
exist: B (and root, but on the namespaces' own routes, which root administers) must get
exactly what a missing resource gets (status and body, no existence leak), and where a route
lists, none of A's ids. A route whose path parameter the
walk does not know fails the test: a new route is walked from the day it exists.

The table of routes x namespaces it walked is printed, and written to ``$ROUTE_TABLE_OUT``
when that is set.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from helpers import TEST_FUNCTIONS, fn, namespace_key, on_gateway, revoke_key

from faasrl import code_archive
from faasrl.client import Client
from faasrl.data import acl
from faasrl.gateway.keys import sigv4_secret
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord

TOKEN = "security-token"
A, B = "lab-a", "lab-b"
FUNCTION = "alpha-fn"
JOB = "alphajob0001"
LAMBDA_PREFIX = "/2015-03-31/"
MISSING = {"name": "no-such-fn", "function_name": "no-such-fn", "job_id": "nosuchjob001",
           "invocation_id": "0" * 32, "namespace": "no-such-ns", "key_id": "0" * 12,
           "letter_id": "0" * 32, "alias": "no-such-alias", "version": "99", "n": "0"}
# Namespaces' own routes: root administers every namespace (and may delete it), so root is not
# sent there; a second namespace's key gets what a missing namespace gets.
ADMIN_PREFIX = "/v1/namespaces"
CREATES = {("POST", "/v1/functions"), ("PUT", "/v1/functions/{name}"), ("POST", "/v1/code")}


class Gateway:
    """Requests to one gateway as a given bearer key (Lambda API routes signed by its id)."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)

    def send(self, method: str, path: str, key: str | None, body: Any = None,
             key_id: str | None = None) -> httpx.Response:
        content = body if isinstance(body, bytes) else (
            json.dumps(body).encode() if body is not None else b"")
        headers = {"Content-Type": "application/zip" if path == "/v1/code"
                   else "application/json"}
        if path.startswith(LAMBDA_PREFIX):
            headers.update(_signed(self.url + path, method, content, key_id, key))
        elif key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return self.http.request(method, path, content=content, headers=headers)


def _signed(url: str, method: str, body: bytes, key_id: str | None, key: str | None
            ) -> dict[str, str]:
    """SigV4 headers: by the gateway's own access key id (root) or an API key's id."""
    if key_id is None:
        creds = Credentials("faasrl", TOKEN)
    else:
        creds = Credentials(key_id, sigv4_secret(TOKEN, key_id))
    request = AWSRequest(method=method, url=url, data=body)
    SigV4Auth(creds, "lambda", "us-east-1").add_auth(request)
    return {k: v for k, v in request.headers.items() if k.lower() != "host"}


@pytest.fixture
def tenants(make_platform) -> Iterator[dict[str, Any]]:
    """The platform, A's resources, and each namespace's key."""
    platform = make_platform(token=TOKEN)
    a_id, a_key = namespace_key(platform, A)
    b_id, b_key = namespace_key(platform, B, "admin")  # every route's, its namespace's too
    with Client(platform.url, a_key) as a:
        a.deploy(fn(FUNCTION))
        invocation = a.invoke(FUNCTION, {"x": 1})["id"]
        a.publish_version(FUNCTION)
        a.set_alias(FUNCTION, "live", 1)
        sha = a.upload_code(TEST_FUNCTIONS)

    async def save_job(services: Any) -> None:
        await services.jobs.store.save(JobRecord(
            id=JOB, spec=JobSpec(env_id="CartPole-v1"), namespace=A, status="succeeded",
            created_at=time.time(), finished_at=time.time()))

    on_gateway(platform, save_job)
    yield {"platform": platform, "keys": {A: (a_id, a_key), B: (b_id, b_key)},
           "ids": {"name": FUNCTION, "function_name": FUNCTION, "job_id": JOB,
                   "invocation_id": invocation, "namespace": A, "key_id": a_id,
                   "letter_id": "f" * 32,  # no letter: the function's namespace decides
                   "alias": "live", "version": "1", "n": "0"},  # n: a job's video
           "sha": sha, "archive": code_archive.pack(TEST_FUNCTIONS)}


def operations(platform: Any) -> list[tuple[str, str]]:
    document = platform._app.openapi()
    return sorted((method.upper(), path) for path, ops in document["paths"].items()
                  for method in ops if method in ("get", "post", "put", "delete", "patch"))


def fill(path: str, ids: dict[str, str]) -> str:
    for param, value in ids.items():
        path = path.replace("{" + param + "}", value)
    assert "{" not in path, f"{path}: the walk knows no resource for this path parameter"
    return path


def body_for(method: str, path: str, archive: bytes) -> Any:
    if path == "/v1/code":
        return archive
    if path.endswith("/invoke"):
        return {"args": {}}
    if path.endswith("/prewarm"):
        return {"count": 0}
    if path.endswith("/dead-letters/redrive"):
        return {"all": True}
    if (method, path) == ("POST", "/v1/functions"):
        return fn(FUNCTION)
    if (method, path) == ("PUT", "/v1/functions/{name}"):
        return {k: v for k, v in fn(FUNCTION).items() if k != "name"}
    if (method, path) == ("POST", "/v1/jobs"):
        return {"env_id": "CartPole-v1", "actor_function": FUNCTION}
    if (method, path) == ("PUT", "/v1/functions/{name}/aliases/{alias}"):
        return {"version": 1}
    if (method, path) == ("POST", "/2015-03-31/functions/{function_name}/aliases"):
        return {"Name": "canary", "FunctionVersion": "1"}
    if path.startswith(LAMBDA_PREFIX):
        return {}
    return None if method in ("GET", "DELETE") else {}


def _phase(op: tuple[str, str]) -> int:
    """Reads first, then creates (B and root make their own, removed at once), deletes last
    (A's own delete runs after B's and root's were refused)."""
    return 2 if op[0] == "DELETE" else 1 if op in CREATES else 0


def test_a_second_namespace_gets_404_on_every_route_as_for_nothing(tenants):
    platform, ids, keys = tenants["platform"], tenants["ids"], tenants["keys"]
    gw = Gateway(platform.url)
    (a_id, a_key), (b_id, b_key) = keys[A], keys[B]
    secret_ids = [ids["name"], ids["job_id"], ids["invocation_id"]]
    rows: list[tuple[str, str, int, int, int | str, str]] = []
    for method, template in sorted(operations(platform), key=lambda op: (_phase(op), op)):
        path = fill(template, ids)
        body = body_for(method, template, tenants["archive"])
        if (method, template) in CREATES:
            # B and root make their own: a name or an archive of A's is never "taken".
            as_b = gw.send(method, path, b_key, body)
            as_root = gw.send(method, path, TOKEN, body)
            assert (as_b.status_code, as_root.status_code) == (201, 201), \
                (method, template, as_b.text, as_root.text)
            if template.startswith("/v1/functions"):
                for key in (b_key, TOKEN):
                    gw.send("DELETE", f"/v1/functions/{FUNCTION}", key).raise_for_status()
            as_a = gw.send(method, path, a_key, body)
            rows.append((method, template, as_a.status_code, 201, 201, "their own (201)"))
            continue
        as_b = gw.send(method, path, b_key, body, b_id)
        admin_route = template.startswith(ADMIN_PREFIX)
        as_root = None if admin_route else gw.send(method, path, TOKEN, body)
        askers = [("B", as_b)] + ([] if as_root is None else [("root", as_root)])
        if "{" in template or (method, template) == ("POST", "/v1/jobs"):
            missing_body = ({**body, "actor_function": MISSING["name"]}
                            if template == "/v1/jobs" else body)
            b_missing = gw.send(method, fill(template, MISSING), b_key, missing_body, b_id)
            for who, answer in askers:
                same = answer.text
                for param in ("name", "job_id", "invocation_id", "namespace", "key_id"):
                    same = same.replace(ids[param], MISSING[param])
                assert (answer.status_code, same) == (b_missing.status_code, b_missing.text), \
                    (who, method, template, answer.text, b_missing.text)
            if "{" in template:
                assert as_b.status_code == 404, (method, template, as_b.text)
            verdict = f"as missing: {b_missing.status_code}"
        else:
            # Root's scrape is the operator's: every namespace's series (the others below).
            if template == "/metrics":
                askers = [("B", as_b)]
            for who, answer in askers:
                leaked = [i for i in secret_ids if i in answer.text]
                assert not leaked, (who, method, template, leaked)
            verdict = "lists none of A's" + (" (B)" if template == "/metrics" else "")
        as_a = gw.send(method, path, a_key, body, a_id)
        rows.append((method, template, as_a.status_code, as_b.status_code,
                     "-" if as_root is None else as_root.status_code, verdict))
    table = _table(rows)
    print("\n" + table)
    if target := os.environ.get("ROUTE_TABLE_OUT"):
        with open(target, "w") as out:
            out.write(table + "\n")
    # A got its own on each: the walk named real resources.
    owner = {(m, p): a for m, p, a, *_ in rows}
    for op in (("GET", "/v1/functions/{name}"), ("GET", "/v1/jobs/{job_id}"),
               ("GET", "/v1/invocations/{invocation_id}"), ("DELETE", "/v1/jobs/{job_id}")):
        assert owner[op] in (200, 204), (op, owner[op])


def _table(rows: list[tuple[str, str, int, int, int | str, str]]) -> str:
    head = ("method", "route", f"{A} (owner)", f"{B}", "root (default)", "B / root get")
    lines = [head, *[(m, p, str(a), str(b), str(r), v) for m, p, a, b, r, v in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
           for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def test_lists_show_each_namespace_its_own(tenants):
    platform, ids, keys = tenants["platform"], tenants["ids"], tenants["keys"]
    with Client(platform.url, keys[A][1]) as a, Client(platform.url, keys[B][1]) as b, \
            Client(platform.url, TOKEN) as root:
        assert [f["name"] for f in a.functions()] == [FUNCTION]
        assert b.functions() == root.functions() == []
        assert [r["function"] for r in a.invocations()] == [FUNCTION]
        assert b.invocations() == []
        assert [j["id"] for j in a.jobs()] == [JOB]
        assert b.jobs() == root.jobs() == []
        assert list(a.cluster()["functions"]) == [FUNCTION]
        assert b.cluster()["functions"] == {}
        record = a.invocation(ids["invocation_id"])
        assert (record["function"], record["namespace"]) == (FUNCTION, A)
    series = {key: httpx.get(f"{platform.url}/metrics", headers=headers).text
              for key, headers in (("a", {"Authorization": f"Bearer {keys[A][1]}"}),
                                   ("b", {"Authorization": f"Bearer {keys[B][1]}"}),
                                   ("anonymous", {}),
                                   ("root", {"Authorization": f"Bearer {TOKEN}"}))}
    assert f'function="{FUNCTION}"' in series["a"]  # bare, in its own view
    assert FUNCTION not in series["b"] and FUNCTION not in series["anonymous"]
    assert f'function="{A}.{FUNCTION}"' in series["root"]  # root sees every namespace's
    nowhere = httpx.get(f"{platform.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}",
                                                           "X-Faasrl-Namespace": "nowhere"})
    assert nowhere.status_code == 404  # as on every /v1 route, not an empty namespace's view


def test_a_namespace_names_only_its_own_code_archives(tenants):
    platform, keys = tenants["platform"], tenants["keys"]
    manifest = {**fn("beta-fn"), "code_sha256": tenants["sha"]}
    manifest.pop("code_dir", None)
    unknown = {**manifest, "code_sha256": "f" * 64}
    gw = Gateway(platform.url)
    b_key = keys[B][1]
    theirs = gw.send("POST", "/v1/functions", b_key, manifest)
    nothing = gw.send("POST", "/v1/functions", b_key, unknown)
    assert theirs.status_code == nothing.status_code == 422
    assert theirs.json()["error"]["fields"] == nothing.json()["error"]["fields"] \
        == {"code_sha256": nothing.json()["error"]["fields"]["code_sha256"]}
    # Uploading the same bytes makes it B's too (201: B had not stored it; no leak).
    assert gw.send("POST", "/v1/code", b_key, tenants["archive"]).status_code == 201
    assert gw.send("POST", "/v1/code", b_key, tenants["archive"]).status_code == 200
    assert gw.send("POST", "/v1/functions", b_key, manifest).status_code == 201


def test_revoked_malformed_and_read_keys(tenants):
    platform, keys, ids = tenants["platform"], tenants["keys"], tenants["ids"]
    gw = Gateway(platform.url)
    revoked_id, revoked = namespace_key(platform, A)
    revoke_key(platform, revoked_id)
    read_id, read = namespace_key(platform, A, "read")
    malformed = ("frl_0000000000zz_x", "frl_", "not-a-key", keys[A][1] + "x")
    for method, template in operations(platform):
        path = fill(template, ids)
        body = body_for(method, template, tenants["archive"])
        if template.startswith(LAMBDA_PREFIX):  # Lambda's own refusal: 403 with its code
            answer = gw.send(method, path, revoked, body, revoked_id)
            assert answer.status_code == 403, answer.text
            assert answer.headers["x-amzn-ErrorType"] == "UnrecognizedClientException"
            answer = gw.send(method, path, read, body, read_id)
            if method == "GET":  # a read key reads (ListAliases, GetAlias, ...)
                assert answer.status_code == 200, (template, answer.text)
            else:
                assert answer.headers["x-amzn-ErrorType"] == "AccessDeniedException"
            continue
        if not template.startswith("/v1/"):
            continue
        for key in (revoked, *malformed):
            answer = gw.send(method, path, key, body)
            assert answer.status_code == 401, (method, template, key, answer.text)
        answer = gw.send(method, path, read, body)
        if method == "GET":  # reads are a read key's (an admin's route may want more)
            assert "may only read" not in answer.text, (method, template)
        else:
            assert answer.status_code == 403, (method, template, answer.text)
            assert answer.json()["error"]["message"].startswith(f"key {read_id}")
    # The invoke shortcut (gateway/fast_invoke.py) refuses them the same way.
    for key in (revoked, "frl_0000000000zz_x"):
        assert gw.send("POST", f"/v1/functions/{FUNCTION}/invoke", key, {}).status_code == 401


def test_a_function_of_one_namespace_reaches_nothing_of_another(tenants):
    """A's function, in a job of A, cannot read B's job keys, code or records in Redis, nor
    call B's function's runtime."""
    platform, keys = tenants["platform"], tenants["keys"]
    with Client(platform.url, keys[A][1]) as a, Client(platform.url, keys[B][1]) as b:
        b.deploy(fn("other"))
        b_record = b.invoke("other", {})["id"]
        [container] = b.cluster()["functions"]["other"]["containers"]
        a.deploy(fn("probe", handler="fns:probe"))
        with redis.Redis.from_url(platform.redis_url) as admin:
            admin.set("faasrl:job:jobofb000001:secret", "s")
        job = {"id": "alphajob0001", "redis": acl.grant_new(platform.redis_url, JOB)}
        rec = a.invoke("probe", {
            "job": job, "other_job": "jobofb000001", "runtime": container["endpoint"],
            "other_keys": [f"faasrl:code:{tenants['sha']}",
                           f"faasrl:invocation:{b_record}"]})
    assert rec["status"] == "success", rec
    out = rec["result"]
    assert out["redis"]["own_get"] == "1"  # the probe did reach Redis as its job
    for refused in ("other_get", "other_set", "functions_get", "scan"):
        assert out["redis"][refused].startswith("-NOPERM"), (refused, out["redis"])
    assert all(v.startswith("-NOPERM") for v in out["other_keys"].values()), out["other_keys"]
    assert out["runtime_run"] == 401
