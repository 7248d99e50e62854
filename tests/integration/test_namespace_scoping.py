"""A namespace's resources through the API: bare names in and out, functions that come back
after a restart, jobs that run the built-in functions (or the namespace's own of a name) and
whose invocations are the namespace's, the Lambda API by an API key's id. The security side
(every route x a second namespace) is tests/security/test_route_isolation.py."""

from __future__ import annotations

import boto3
import httpx
import pytest
import redis
from botocore.config import Config
from helpers import REPO, finished, fn, namespace_key

from faasrl.client import Client, GatewayError
from faasrl.code_archive import NO_ARCHIVE
from faasrl.data.keys import invocations_index_key
from faasrl.gateway.keys import sigv4_secret

TOKEN = "namespaces-token"
TEST_ENVS = REPO / "tests" / "envs" / "corridor"
JOB = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
       "controller": {"name": "fixed", "actors": 1}, "evaluation_episodes": 1,
       "stop": {"max_rounds": 2}}


def test_names_are_bare_in_and_out_and_come_back_after_a_restart(make_platform, redis_url):
    platform = make_platform(token=TOKEN)
    _, key = namespace_key(platform, "lab-a")
    with Client(platform.url, key) as lab:
        assert lab.deploy(fn("keeper"))["name"] == "keeper"
        answer = lab.invoke("keeper", {"x": 1})  # the invoke shortcut (fast_invoke.py)
        assert (answer["function"], answer["namespace"]) == ("keeper", "lab-a")
        assert lab.function_stats("keeper")["function"] == "keeper"
    with redis.Redis.from_url(redis_url) as r:  # inside, the platform's qualified name
        assert r.hexists("faasrl:functions", "lab-a.keeper")
    platform.stop()
    platform = make_platform(token=TOKEN)
    with Client(platform.url, key) as lab, Client(platform.url, TOKEN) as root:
        assert [f["name"] for f in lab.functions()] == ["keeper"]
        assert lab.invoke("keeper", {"x": 2})["result"]["args"] == {"x": 2}
        assert root.functions() == []
        root.deploy(fn("keeper"))  # default's own of the same name, beside it
        assert [f["name"] for f in lab.functions()] == ["keeper"]


def test_a_name_from_a_user_never_holds_the_separator(make_platform):
    platform = make_platform(token=TOKEN)
    _, key = namespace_key(platform, "lab-a")
    namespace_key(platform, "lab-b")
    headers = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(f"{platform.url}/v1/functions", headers=headers,
                        json=fn("lab-b.echo"))
    assert answer.status_code == 422 and "name" in answer.json()["error"]["fields"]
    answer = httpx.put(f"{platform.url}/v1/functions/lab-b.echo", headers=headers,
                       json={"handler": "fns:echo"})
    assert answer.status_code == 422 and "name" in answer.json()["error"]["fields"]
    answer = httpx.post(f"{platform.url}/v1/jobs", headers=headers,
                        json={"env_id": "CartPole-v1", "actor_function": "lab-b.actor"})
    assert answer.status_code == 422
    assert list(answer.json()["error"]["fields"]) == ["actor_function"]


def test_a_namespaces_job_runs_the_builtins_and_its_invocations_are_its_own(make_platform,
                                                                            redis_url):
    platform = make_platform(token=TOKEN, register_builtins=True)
    _, key = namespace_key(platform, "lab-a")
    _, other = namespace_key(platform, "lab-b")
    with Client(platform.url, key) as lab, Client(platform.url, TOKEN) as root, \
            Client(platform.url, other) as b:
        job = lab.submit(JOB)
        assert (job["namespace"], job["spec"]["actor_function"]) == ("lab-a", "actor")
        done = finished(lab, job["id"])
        assert done["status"] == "succeeded", done
        assert root.jobs() == [] and b.jobs() == []
        with redis.Redis.from_url(redis_url) as r:
            ids = [i.decode() for i in r.lrange(invocations_index_key("learner"), 0, -1)]
        assert ids
        for invocation_id in ids:  # the built-in learner's calls, each the job's namespace's
            record = lab.invocation(invocation_id)
            assert (record["function"], record["namespace"]) == ("learner", "lab-a")
            with pytest.raises(GatewayError) as refused:
                root.invocation(invocation_id)
            assert refused.value.status == 404
        assert root.invocations("learner") == []  # default's list holds none of them
        # A job runs the namespace's own function of a name: here an echo, no actor, whose
        # calls fail the job; lab-b has no function by that name.
        lab.deploy(fn("my-actor"))
        mine = lab.submit({**JOB, "actor_function": "my-actor"})
        assert mine["spec"]["actor_function"] == "my-actor"
        assert finished(lab, mine["id"])["status"] == "failed"
        assert lab.invocations("my-actor")  # it ran lab-a's my-actor
        with pytest.raises(GatewayError) as none:
            b.submit({**JOB, "actor_function": "my-actor"})
        assert none.value.fields == {"actor_function": "no function named 'my-actor' is "
                                                       "registered"}
        # An env archive lab-a uploaded is, to lab-b, one that never was.
        env = {"code_sha256": lab.upload_code(TEST_ENVS), "entry_point": "corridor:Corridor"}
        with pytest.raises(GatewayError) as theirs:
            b.submit({**JOB, "env": env})
        assert theirs.value.fields == {"env.code_sha256": NO_ARCHIVE}


def test_the_lambda_api_by_an_api_keys_id_acts_in_its_namespace(make_platform):
    platform = make_platform(token=TOKEN)
    key_id, key = namespace_key(platform, "lab-a")
    other_id, _ = namespace_key(platform, "lab-b")
    with Client(platform.url, key) as lab, Client(platform.url, TOKEN) as root:
        lab.deploy(fn("greet"))
        root.deploy(fn("hello"))

    def lambda_client(key_id: str, secret: str):
        return boto3.client("lambda", endpoint_url=platform.url, region_name="us-east-1",
                            aws_access_key_id=key_id, aws_secret_access_key=secret,
                            config=Config(retries={"max_attempts": 0}))

    lab = lambda_client(key_id, sigv4_secret(TOKEN, key_id))
    out = lab.invoke(FunctionName="greet", Payload=b'{"x": 1}')
    assert out["StatusCode"] == 200 and b'"x": 1' in out["Payload"].read().replace(b":", b": ")
    with pytest.raises(lab.exceptions.ResourceNotFoundException):
        lab.invoke(FunctionName="hello")  # default's, not lab-a's
    b = lambda_client(other_id, sigv4_secret(TOKEN, other_id))
    with pytest.raises(b.exceptions.ResourceNotFoundException):
        b.invoke(FunctionName="greet")
    root = lambda_client("faasrl", TOKEN)  # the configured access key id: root, as before
    assert root.invoke(FunctionName="hello")["StatusCode"] == 200
    with pytest.raises(root.exceptions.ResourceNotFoundException):
        root.invoke(FunctionName="greet")
    wrong = lambda_client(key_id, "not-its-secret")
    with pytest.raises(wrong.exceptions.ClientError) as refused:
        wrong.invoke(FunctionName="greet")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
