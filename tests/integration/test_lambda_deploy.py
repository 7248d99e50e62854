"""``faasrl deploy lambda``: the control-plane steps against moto's ECR/IAM/Lambda (AWS cannot
be reached here), the push against a real registry on 127.0.0.1 through the real Docker engine.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from faasrl.cli import app
from faasrl.lambda_deploy import BASIC_EXECUTION, ROLE_NAME, LambdaDeployer, LambdaDeployment
from faasrl.redis_server import free_port

ECR_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")  # as AWS has them
    with mock_aws():
        yield


def put_image(repository: str, tag: str) -> None:
    """What a push leaves in ECR, for moto (which serves no registry to push to)."""
    manifest = {"schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                           "size": 2, "digest": "sha256:" + tag.ljust(64, "0")},
                "layers": []}
    boto3.client("ecr").put_image(repositoryName=repository, imageTag=tag,
                                  imageManifest=json.dumps(manifest))


def test_control_plane_steps_create_then_update(aws):
    events: list[tuple[str, dict]] = []
    deployer = LambdaDeployer(boto3.session.Session(), progress=lambda s, d: events.append((s, d)),
                              poll_s=0.01)
    uri = deployer.ensure_repository("faasrl-actor")
    assert uri == f"{ECR_URI}/faasrl-actor"
    assert deployer.ensure_repository("faasrl-actor") == uri
    assert [d["created"] for s, d in events if s == "ECR repository"] == [True, False]

    role = deployer.ensure_role(None)
    assert deployer.ensure_role(None) == role and role.endswith(f":role/{ROLE_NAME}")
    iam = boto3.client("iam")
    trust = iam.get_role(RoleName=ROLE_NAME)["Role"]["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    assert trust["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}
    attached = iam.list_attached_role_policies(RoleName=ROLE_NAME)["AttachedPolicies"]
    assert [p["PolicyArn"] for p in attached] == [BASIC_EXECUTION]
    assert deployer.ensure_role("arn:aws:iam::123456789012:role/mine").endswith("/mine")

    aws_lambda = boto3.client("lambda")
    put_image("faasrl-actor", "aaa111")
    first = LambdaDeployment(memory_mb=1024, timeout_s=60)
    out = deployer.upsert_function(first, f"{uri}:aaa111", role)
    assert out["FunctionArn"].endswith(":function:faasrl-actor")
    version, alias_arn = deployer.publish(first)
    assert alias_arn == f"{out['FunctionArn']}:live"
    fn = aws_lambda.get_function(FunctionName="faasrl-actor")
    assert fn["Configuration"]["PackageType"] == "Image"
    assert fn["Configuration"]["State"] == "Active"
    assert (fn["Configuration"]["MemorySize"], fn["Configuration"]["Timeout"]) == (1024, 60)
    assert fn["Code"]["ImageUri"] == f"{uri}:aaa111"
    assert aws_lambda.get_alias(FunctionName="faasrl-actor", Name="live")["FunctionVersion"] \
        == version

    put_image("faasrl-actor", "bbb222")
    second = LambdaDeployment(memory_mb=2048, timeout_s=30)
    deployer.upsert_function(second, f"{uri}:bbb222", role)
    new_version, _ = deployer.publish(second)
    fn = aws_lambda.get_function(FunctionName="faasrl-actor")
    assert (fn["Configuration"]["MemorySize"], fn["Configuration"]["Timeout"]) == (2048, 30)
    assert fn["Code"]["ImageUri"] == f"{uri}:bbb222"
    assert new_version != version
    assert aws_lambda.get_alias(FunctionName="faasrl-actor", Name="live")["FunctionVersion"] \
        == new_version
    deployer.set_provisioned(second)  # 0: nothing provisioned, nothing to remove
    assert [d["created"] for s, d in events if s == "function"] == [True, False]


# ------------------------------------------------------------------- the push
@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """A real image registry (Debian's docker-registry) on 127.0.0.1."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("no docker-registry binary (apt-get install docker-registry)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: "
                      f"{tmp_path / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
                      "log:\n  level: error\n")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://{address}/v2/").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the registry did not start")
            time.sleep(0.05)
        yield address
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def tiny_image(docker_client, registry) -> Iterator[str]:
    """A one-file image made with ``docker import`` (no base image needed)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        content = f"faasrl deploy test {time.time_ns()}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    name = f"faasrl-test/lambda-tiny-{time.time_ns()}"
    docker_client.api.import_image_from_data(data.getvalue(), repository=name, tag="latest")
    image = docker_client.images.get(f"{name}:latest")
    yield f"{name}:latest"
    for tag in docker_client.images.get(image.id).tags:  # ours only: the engine is shared
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_push_reaches_a_real_registry(docker_client, registry, tiny_image):
    events: list[tuple[str, dict]] = []
    deployer = LambdaDeployer(boto3.session.Session(region_name="us-east-1"), docker_client,
                              progress=lambda s, d: events.append((s, d)))
    uri, digest = deployer.push(tiny_image, f"{ECR_URI}/faasrl-tiny", registry=registry)
    tag = uri.rsplit(":", 1)[1]
    assert uri == f"{ECR_URI}/faasrl-tiny:{tag}" and digest.startswith("sha256:")
    assert tag == docker_client.images.get(tiny_image).id.split(":")[1][:12]
    tags = httpx.get(f"http://{registry}/v2/faasrl-tiny/tags/list").json()["tags"]
    assert tag in tags
    head = httpx.head(f"http://{registry}/v2/faasrl-tiny/manifests/{tag}", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    assert head.headers["Docker-Content-Digest"] == digest
    assert events[-1] == ("push", {"digest": digest, "done": True})


@pytest.mark.docker
def test_cli_deploys_end_to_end(aws, docker_client, registry, tiny_image, monkeypatch):
    # The image went to the local registry, not to moto's ECR: moto checks no image.
    monkeypatch.setenv("MOTO_LAMBDA_STUB_ECR", "TRUE")
    runner = CliRunner()
    args = ["deploy", "lambda", "--function", "tiny", "--image", tiny_image, "--memory", "1024",
            "--timeout", "60", "--push-registry", registry, "--region", "us-east-1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "arn:aws:lambda:us-east-1:123456789012:function:faasrl-tiny:live" in result.output
    assert "function_name: faasrl-tiny" in result.output and "qualifier: live" in result.output
    assert "testing" not in result.output  # no credential is printed
    fn = boto3.client("lambda").get_function(FunctionName="faasrl-tiny")
    tag = fn["Code"]["ImageUri"].rsplit(":", 1)[1]
    assert tag in httpx.get(f"http://{registry}/v2/faasrl-tiny/tags/list").json()["tags"]

    missing = runner.invoke(app, [*args[:5], "no-such-image:latest", *args[6:]])
    assert missing.exit_code == 1 and "local image 'no-such-image:latest'" in missing.output
