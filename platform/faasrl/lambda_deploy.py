"""``faasrl deploy lambda``: a function's container image onto AWS Lambda, with boto3.

Steps, each idempotent so a deploy can simply be run again: create the ECR repository if it is
missing; push the local image (built from ``deploy/aws-lambda/``) with the docker SDK, tagged
with its image id so that a new build is a new tag; find or create the execution role; create
the Lambda function (``PackageType=Image``) or update its code and configuration; wait until it
is Active; publish a version and point the alias (``live``) at it; set or remove provisioned
concurrency on the alias and wait until it is ready.

Credentials and region come from boto3's standard chain. The ECR password goes to the Docker
engine in the push request only (``auth_config``): nothing is written to ``~/.docker`` or logged.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, WaiterError

TRUST_POLICY = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
    "Action": "sts:AssumeRole"}]}
BASIC_EXECUTION = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
ROLE_NAME = "faasrl-lambda"
ROLE_PROPAGATION_S = 60.0  # a new IAM role can take this long before Lambda may assume it


class DeployError(RuntimeError):
    """A deploy step failed; the message names the step and AWS's or Docker's reason."""


@dataclass(frozen=True)
class LambdaDeployment:
    """What to deploy: the faasrl function, its Lambda settings, and which local image."""

    function: str = "actor"
    memory_mb: int = 1024
    timeout_s: int = 60
    provisioned: int = 0
    name: str | None = None  # the Lambda function's name; default faasrl-<function>
    image: str | None = None  # the local image; default faasrl/lambda-<function>:latest
    repository: str | None = None  # the ECR repository; default faasrl-<function>
    role_arn: str | None = None  # default: the faasrl-lambda role, created if missing
    alias: str = "live"
    push_registry: str | None = None  # push here instead of ECR's registry (a mirror, a test)

    @property
    def lambda_name(self) -> str:
        return self.name or f"faasrl-{self.function}"

    @property
    def local_image(self) -> str:
        return self.image or f"faasrl/lambda-{self.function}:latest"

    @property
    def repository_name(self) -> str:
        return self.repository or f"faasrl-{self.function}"


@dataclass(frozen=True)
class Deployed:
    function_arn: str
    alias_arn: str
    version: str
    image_uri: str
    region: str


# What a step reports: (step, detail). The CLI draws it; tests may record it.
Progress = Callable[[str, dict[str, Any]], None]


def _quiet(step: str, detail: dict[str, Any]) -> None:
    pass


def _fail(step: str, exc: Exception) -> DeployError:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        reason = f"{err.get('Code', 'ClientError')}: {err.get('Message', exc)}"
    else:
        reason = str(exc)
    return DeployError(f"{step}: {reason}")


class LambdaDeployer:
    """The deploy steps, on a boto3 session and a docker SDK client (only ``push`` uses it)."""

    def __init__(self, session: Any, docker_client: Any = None, *,
                 progress: Progress = _quiet, poll_s: float = 2.0):
        self.session = session
        self.region = session.region_name
        if self.region is None:
            raise DeployError("no AWS region: pass --region or set AWS_REGION (or a profile's "
                              "region)")
        self.ecr = session.client("ecr")
        self.iam = session.client("iam")
        self.aws_lambda = session.client("lambda")
        self.docker = docker_client
        self.progress = progress
        self.poll_s = poll_s

    # ------------------------------------------------------------------ image
    def ensure_repository(self, name: str) -> str:
        """The ECR repository's URI, creating the repository if it is missing."""
        step = "ECR repository"
        try:
            repo = self.ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
            self.progress(step, {"created": False, "uri": repo["repositoryUri"]})
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "RepositoryNotFoundException":
                raise _fail(step, exc) from exc
            try:
                repo = self.ecr.create_repository(
                    repositoryName=name, imageScanningConfiguration={"scanOnPush": True},
                    imageTagMutability="MUTABLE")["repository"]
            except ClientError as exc2:
                raise _fail(step, exc2) from exc2
            self.progress(step, {"created": True, "uri": repo["repositoryUri"]})
        return repo["repositoryUri"]

    def push(self, local_image: str, repository_uri: str, *,
             registry: str | None = None) -> tuple[str, str]:
        """Push the local image; returns (the image URI Lambda pulls, the pushed digest).

        ``registry``: push to ``<registry>/<repository name>`` instead (no ECR login there).
        """
        step = "push"
        if self.docker is None:
            raise DeployError(f"{step}: no Docker engine to push {local_image} from")
        from docker.errors import DockerException

        try:
            image = self.docker.images.get(local_image)
        except DockerException as exc:
            raise DeployError(f"{step}: local image {local_image!r}: {exc} (build it from "
                              "deploy/aws-lambda/, see its README)") from exc
        tag = image.id.split(":", 1)[-1][:12]  # the image id: a new build is a new tag
        target = f"{registry}/{repository_uri.split('/', 1)[1]}" if registry else repository_uri
        auth = None if registry else self._ecr_login()
        try:
            image.tag(target, tag)
            stream = self.docker.api.push(target, tag, stream=True, decode=True,
                                          auth_config=auth)
            digest = self._follow_push(stream)
        except DockerException as exc:
            raise DeployError(f"{step}: {exc}") from exc
        return f"{repository_uri}:{tag}", digest

    def _ecr_login(self) -> dict[str, str]:
        try:
            data = self.ecr.get_authorization_token()["authorizationData"][0]
        except ClientError as exc:
            raise _fail("ECR login", exc) from exc
        user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
        return {"username": user, "password": password}

    def _follow_push(self, stream: Iterator[dict[str, Any]]) -> str:
        layers: dict[str, tuple[int, int]] = {}
        digest = ""
        for event in stream:
            if "error" in event:
                raise DeployError(f"push: {event['error']}")
            if "aux" in event:
                digest = event["aux"].get("Digest", digest)
            detail = event.get("progressDetail") or {}
            if event.get("id") and detail.get("total"):
                layers[event["id"]] = (detail.get("current", 0), detail["total"])
                self.progress("push", {"bytes": sum(c for c, _ in layers.values()),
                                       "total": sum(t for _, t in layers.values())})
        if not digest:
            raise DeployError("push: the engine reported no digest for the pushed image")
        self.progress("push", {"digest": digest, "done": True})
        return digest

    # --------------------------------------------------------------- function
    def ensure_role(self, role_arn: str | None) -> str:
        if role_arn:
            return role_arn
        step = "IAM role"
        try:
            arn = self.iam.get_role(RoleName=ROLE_NAME)["Role"]["Arn"]
            self.progress(step, {"created": False, "arn": arn})
            return arn
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchEntity":
                raise _fail(step, exc) from exc
        try:
            arn = self.iam.create_role(
                RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
                Description="Execution role of faasrl's Lambda functions")["Role"]["Arn"]
            self.iam.attach_role_policy(RoleName=ROLE_NAME, PolicyArn=BASIC_EXECUTION)
        except ClientError as exc:
            raise _fail(step, exc) from exc
        self.progress(step, {"created": True, "arn": arn})
        return arn

    def upsert_function(self, d: LambdaDeployment, image_uri: str, role_arn: str
                        ) -> dict[str, Any]:
        """Create the function or update its code and configuration; wait until Active."""
        step, name = "function", d.lambda_name
        config = {"MemorySize": d.memory_mb, "Timeout": d.timeout_s, "Role": role_arn,
                  "Description": f"faasrl function {d.function}"}
        try:
            self.aws_lambda.get_function(FunctionName=name)
            exists = True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise _fail(step, exc) from exc
            exists = False
        try:
            if exists:
                self.aws_lambda.update_function_code(FunctionName=name, ImageUri=image_uri)
                self._wait("function_updated_v2", name)
                out = self.aws_lambda.update_function_configuration(FunctionName=name, **config)
                self._wait("function_updated_v2", name)
            else:
                out = self._create(name, image_uri, config)
            self._wait("function_active_v2", name)
        except ClientError as exc:
            raise _fail(step, exc) from exc
        self.progress(step, {"created": not exists, "arn": out["FunctionArn"],
                             "state": "Active"})
        return out

    def _create(self, name: str, image_uri: str, config: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + ROLE_PROPAGATION_S
        while True:
            try:
                return self.aws_lambda.create_function(
                    FunctionName=name, PackageType="Image", Code={"ImageUri": image_uri},
                    **config)
            except ClientError as exc:
                err = exc.response["Error"]
                if (err["Code"] != "InvalidParameterValueException"
                        or "cannot be assumed" not in err.get("Message", "")
                        or time.monotonic() > deadline):
                    raise
                self.progress("function", {"waiting": "the new IAM role to propagate"})
                time.sleep(self.poll_s)

    def _wait(self, waiter: str, name: str) -> None:
        try:
            self.aws_lambda.get_waiter(waiter).wait(
                FunctionName=name, WaiterConfig={"Delay": self.poll_s, "MaxAttempts": 300})
        except WaiterError as exc:
            raise DeployError(f"function: {name} did not become ready: {exc}") from exc

    def publish(self, d: LambdaDeployment) -> tuple[str, str]:
        """Publish a version and point the alias at it; returns (version, alias ARN)."""
        step, name = "version", d.lambda_name
        try:
            version = self.aws_lambda.publish_version(FunctionName=name)["Version"]
            try:
                alias = self.aws_lambda.update_alias(FunctionName=name, Name=d.alias,
                                                     FunctionVersion=version)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                    raise
                alias = self.aws_lambda.create_alias(FunctionName=name, Name=d.alias,
                                                     FunctionVersion=version)
        except ClientError as exc:
            raise _fail(step, exc) from exc
        self.progress(step, {"version": version, "alias": alias["AliasArn"]})
        return version, alias["AliasArn"]

    def set_provisioned(self, d: LambdaDeployment, timeout_s: float = 900.0) -> None:
        """Provisioned concurrency on the alias (``d.provisioned`` environments, 0 removes)."""
        step, name = "provisioned concurrency", d.lambda_name
        try:
            if d.provisioned == 0:
                self.aws_lambda.delete_provisioned_concurrency_config(FunctionName=name,
                                                                      Qualifier=d.alias)
                self.progress(step, {"removed": True})
                return
            self.aws_lambda.put_provisioned_concurrency_config(
                FunctionName=name, Qualifier=d.alias,
                ProvisionedConcurrentExecutions=d.provisioned)
            deadline = time.monotonic() + timeout_s
            while True:
                cfg = self.aws_lambda.get_provisioned_concurrency_config(FunctionName=name,
                                                                         Qualifier=d.alias)
                self.progress(step, {"status": cfg["Status"], "ready": cfg.get(
                    "AvailableProvisionedConcurrentExecutions", 0), "total": d.provisioned})
                if cfg["Status"] == "READY":
                    return
                if cfg["Status"] == "FAILED":
                    raise DeployError(f"{step}: {cfg.get('StatusReason', 'FAILED')}")
                if time.monotonic() > deadline:
                    raise DeployError(f"{step}: not ready after {timeout_s:g} s")
                time.sleep(self.poll_s)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if d.provisioned == 0 and status == 404:
                return  # ProvisionedConcurrencyConfigNotFoundException: nothing to remove
            raise _fail(step, exc) from exc

    # ------------------------------------------------------------------- all
    def deploy(self, d: LambdaDeployment) -> Deployed:
        repository_uri = self.ensure_repository(d.repository_name)
        image_uri, _ = self.push(d.local_image, repository_uri, registry=d.push_registry)
        role_arn = self.ensure_role(d.role_arn)
        function = self.upsert_function(d, image_uri, role_arn)
        version, alias_arn = self.publish(d)
        self.set_provisioned(d)
        return Deployed(function_arn=function["FunctionArn"], alias_arn=alias_arn,
                        version=version, image_uri=image_uri, region=self.region)


def manifest_section(deployed: Deployed, d: LambdaDeployment) -> str:
    """The ``aws_lambda`` section that places a faasrl function on what was deployed."""
    return (f"aws_lambda:\n  function_name: {d.lambda_name}\n  qualifier: {d.alias}\n"
            f"  region: {deployed.region}\n")
