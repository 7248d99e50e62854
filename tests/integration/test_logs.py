"""Function logs through a real gateway: what a handler prints, logs and warns reaches its
invocation's logs, bounded, unmixed between concurrent runs, followed as a stream, through the
CLI and Lambda's LogResult, per job, and never into another namespace."""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.config import Config
from helpers import TEST_FUNCTIONS, fn, wait_for
from redis.asyncio import Redis

from faasrl.client import Client, GatewayError
from faasrl.gateway.keys import KeyStore
from faasrl.namespaces import Namespace
from faasrl.runtime.logs import LOG_MAX

TOKEN = "logs-test-token"
SHORT_JOB = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 16,
             "controller": {"name": "fixed", "actors": 1}, "evaluation_episodes": 1,
             "stop": {"max_rounds": 2}}


def written(tag: str) -> str:
    """What ``fns:chatty`` writes for ``tag`` (no extra KB): its print, its log line through
    the runtime's root handler, its warning as Python writes one, its thread's print (the only
    invocation running) and its last line, on stderr."""
    source = (TEST_FUNCTIONS / "fns.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "warnings.warn(f\"warn" in text)
    return (f"print {tag}\n[INFO] chatty: log {tag}\n"
            f"{TEST_FUNCTIONS / 'fns.py'}:{line}: UserWarning: warn {tag}\n"
            f"  {source[line - 1].strip()}\nthread {tag}\nend {tag}\n")


@pytest.fixture
def platform(make_platform, redis_url):
    """A platform with the token, and a second namespace whose write key is ``.other_key``."""
    async def other_key() -> str:
        redis = Redis.from_url(redis_url)
        try:
            keys = KeyStore(redis)
            await keys.load()
            await keys.save_namespace(Namespace(name="lab-b"))
            return (await keys.create_key("lab-b", "write", "logs test"))[1]
        finally:
            await redis.aclose()

    key = asyncio.run(other_key())
    p = make_platform(token=TOKEN, register_builtins=True)
    p.other_key = key
    with Client(p.url, TOKEN) as c:
        c.deploy(fn("chatty", handler="fns:chatty"))
    return p


@pytest.fixture
def client(platform):
    with Client(platform.url, TOKEN) as c:
        yield c


def test_an_invocations_logs_hold_what_it_printed_logged_and_warned(client):
    rec = client.invoke("chatty", {"tag": "a"})
    assert rec["status"] == "success" and rec["job"] is None
    assert client.invocation_logs(rec["id"]) == written("a")

    out = client.function_logs("chatty")
    assert [(i["id"], i["logs"]) for i in out["invocations"]] == [(rec["id"], written("a"))]
    # Import-time output is the container's, not the invocation's.
    assert [c["logs"] for c in out["containers"]] == ["chatty imported\n"]

    quiet = client.invoke("chatty", {"tag": "b"})  # warm: the imports wrote nothing new
    assert client.invocation_logs(quiet["id"]) == written("b")
    assert len(client.function_logs("chatty")["containers"]) == 1


def test_a_timed_out_invocation_keeps_what_it_wrote_before_its_deadline(client):
    client.deploy(fn("stuck", handler="fns:chatty", timeout_s=0.5))
    rec = client.invoke("stuck", {"tag": "late", "s": 5})
    assert rec["status"] == "timeout"
    assert client.invocation_logs(rec["id"]) == "print late\n"


def test_logs_keep_the_last_64_kb(client):
    rec = client.invoke("chatty", {"tag": "big", "kb": 100})  # ~100 KB of numbered lines
    text = client.invocation_logs(rec["id"])
    assert len(text.encode()) <= LOG_MAX
    first, rest = text.split("\n", 1)
    dropped = int(first.removeprefix("[faasrl: ").removesuffix(" earlier bytes dropped]"))
    assert dropped + len(rest.encode()) == 100 * 1024 + len(written("big").encode())
    assert rest.endswith("000099" + "y" * 1017 + "\nthread big\nend big\n")
    assert "print big" not in text  # the start went first


def test_concurrent_invocations_on_one_container_keep_their_own_logs(client):
    client.deploy(fn("together", handler="fns:chatty", max_concurrency=4))
    tags = ["x", "y", "z"]
    with ThreadPoolExecutor(len(tags)) as pool:
        recs = list(pool.map(lambda t: client.invoke("together", {"tag": t, "s": 0.3}), tags))
    assert len({r["container"] for r in recs}) == 1  # they did share a container
    texts = {tag: client.invocation_logs(rec["id"]) for tag, rec in zip(tags, recs, strict=True)}
    shared = "".join(c["logs"] for c in client.function_logs("together")["containers"])
    for tag, text in texts.items():
        # Its own lines, in order. Its thread's print is its own only while it ran alone
        # (a thread does not inherit the run's context); else it is the container's.
        assert [line for line in text.splitlines() if line != f"thread {tag}"] \
            == written(tag).replace(f"thread {tag}\n", "").splitlines(), text
        assert (f"thread {tag}" in text.splitlines()) != (f"thread {tag}" in shared), shared


def test_following_a_function_receives_a_new_invocations_output(client, platform):
    old = client.invoke("chatty", {"tag": "old"})
    events: queue.Queue[tuple[str, dict]] = queue.Queue()

    def follow() -> None:
        with Client(platform.url, TOKEN) as c:
            for event in c.follow_logs("chatty", limit=1):
                events.put(event)
                if event[0] == "invocation" and event[1]["logs"].startswith("print new"):
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    got = [events.get(timeout=30) for _ in range(2)]  # the kept container output, the tail
    assert ("invocation", old["id"]) in [(e, d.get("id")) for e, d in got]
    new = client.invoke("chatty", {"tag": "new"})
    event, data = events.get(timeout=30)
    assert (event, data["id"], data["logs"], data["function"]) == \
        ("invocation", new["id"], written("new"), "chatty")
    reader.join(timeout=10)


def faasrl(platform, *args: str, check: bool = True) -> str:
    """``faasrl ARGS`` against the platform, as a user runs it; its output (and errors)."""
    out = subprocess.run([sys.executable, "-m", "faasrl", *args], text=True,
                         capture_output=True, timeout=60,
                         env={"FAASRL_URL": platform.url, "FAASRL_TOKEN": TOKEN,
                              "COLUMNS": "200", "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": str(Path(__file__).parents[2] / "platform")})
    assert (out.returncode == 0) == check, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_the_cli_prints_a_functions_logs(client, platform):
    rec = client.invoke("chatty", {"tag": "cli"})
    out = faasrl(platform, "logs", "chatty")
    assert f"chatty {rec['id']} success" in out
    assert written("cli") in out and "chatty imported" in out
    assert "--job" in faasrl(platform, "logs", check=False)


def test_lambdas_log_result_is_the_invocations_log_in_its_framing(client, platform):
    aws = boto3.client("lambda", endpoint_url=platform.url, region_name="us-east-1",
                       aws_access_key_id="faasrl", aws_secret_access_key=TOKEN,
                       config=Config(retries={"total_max_attempts": 1}))
    resp = aws.invoke(FunctionName="chatty", Payload=json.dumps({"tag": "aws"}), LogType="Tail")
    request_id = resp["ResponseMetadata"]["RequestId"]
    tail = base64.b64decode(resp["LogResult"]).decode()
    assert tail.startswith(f"START RequestId: {request_id} Version: $LATEST\n" + written("aws")
                           + f"END RequestId: {request_id}\nREPORT RequestId: {request_id}\t")
    assert client.invocation_logs(request_id) == written("aws")

    resp = aws.invoke(FunctionName="chatty", Payload=json.dumps({"tag": "long", "kb": 10}),
                      LogType="Tail")
    tail = base64.b64decode(resp["LogResult"])
    assert len(tail) <= 4096
    lines = tail.decode(errors="replace").splitlines()
    assert lines[0].startswith("START RequestId: ") and lines[-2].startswith("END RequestId:")
    assert lines[-1].startswith("REPORT RequestId: ") and lines[-3] == "end long"


def test_an_invocation_placed_on_lambda_keeps_the_output_of_lambdas_tail(
        client, platform, monkeypatch):
    """Its twin on "Lambda" is this gateway's own Lambda API (as in test_lambda_backend): the
    record's logs are what the tail log's lines hold beside Lambda's own."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "faasrl")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TOKEN)
    client.deploy(fn("chatty-lambda", placement="lambda",
                     aws_lambda={"function_name": "chatty", "endpoint_url": platform.url,
                                 "region": "us-east-1"}))
    rec = client.invoke("chatty-lambda", {"tag": "far"})
    assert rec["status"] == "success" and rec["backend"] == "lambda"
    assert client.invocation_logs(rec["id"]) == written("far")


def test_a_jobs_logs_are_its_invocations_across_functions(client, platform):
    job = client.submit(SHORT_JOB)
    other = client.submit(SHORT_JOB)
    for j in (job, other):
        wait_for(lambda j=j: client.job(j["id"])["status"] not in ("pending", "running"),
                 timeout_s=180, what="the job to end", poll_s=0.2)
    mine = client.job_logs(job["id"], limit=100)["invocations"]
    assert {i["function"] for i in mine} >= {"actor", "learner"}
    assert {i["job"] for i in mine} == {job["id"]}
    assert all(client.invocation(i["id"])["job"] == job["id"] for i in mine[:3])
    actors = client.function_logs("actor", job=job["id"], limit=100)["invocations"]
    assert actors and {i["job"] for i in actors} == {job["id"]}
    assert {i["id"] for i in actors} == {i["id"] for i in mine if i["function"] == "actor"}
    everyone = client.function_logs("actor", limit=100)["invocations"]
    assert {i["job"] for i in everyone} >= {job["id"], other["id"]}
    out = faasrl(platform, "logs", "--job", job["id"], "--limit", "100")
    assert f"actor {mine[0]['id']}" in out or f"learner {mine[0]['id']}" in out
    assert other["id"] not in out


def test_another_namespaces_key_gets_404_on_every_logs_route(client, platform):
    rec = client.invoke("chatty", {"tag": "mine"})
    job = client.submit({**SHORT_JOB, "stop": {"max_rounds": 1}})
    stranger = httpx.Client(base_url=platform.url,
                            headers={"Authorization": f"Bearer {platform.other_key}"})
    with stranger:
        for path in (f"/v1/invocations/{rec['id']}/logs", "/v1/functions/chatty/logs",
                     "/v1/functions/chatty/logs?follow=1", f"/v1/jobs/{job['id']}/logs",
                     f"/v1/jobs/{job['id']}/logs?follow=1",
                     f"/v1/functions/actor/logs?job={job['id']}",
                     f"/v1/invocations/{'0' * 32}/logs"):
            resp = stranger.get(path)
            assert resp.status_code == 404, (path, resp.text)
        # Another namespace's invocation reads as one that never was.
        never = stranger.get(f"/v1/invocations/{'0' * 32}/logs").json()["error"]["message"]
        theirs = stranger.get(f"/v1/invocations/{rec['id']}/logs").json()["error"]["message"]
        assert theirs.replace(rec["id"], "0" * 32) == never
    with pytest.raises(GatewayError) as err:
        client.function_logs("nope")
    assert err.value.status == 404


def test_an_archived_invocations_logs_are_gone_and_say_so(make_platform):
    """The archive keeps records, not logs: past Redis's bound, the record reads from the
    archive and its logs are a 404 saying why."""
    platform = make_platform(token=TOKEN, record_max_count=2)
    with Client(platform.url, TOKEN) as c:
        c.deploy(fn("chatty", handler="fns:chatty"))
        first = c.invoke("chatty", {"tag": "first"})
        assert c.invocation_logs(first["id"]) == written("first")
        for i in range(4):
            c.invoke("chatty", {"tag": str(i)})

        def gone() -> str | None:
            try:
                c.invocation_logs(first["id"])
            except GatewayError as exc:
                return exc.message
            return None

        message = wait_for(gone, what="the first invocation's logs to leave Redis")
        assert "past their retention" in message and "the archive keeps records, not logs" \
            in message
        assert c.invocation(first["id"])["id"] == first["id"]  # its record, from the archive
