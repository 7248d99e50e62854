"""Function manifests: what a function is, what it needs, and how to load one from its folder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from faasrl.code_archive import SHA256_PATTERN
from faasrl.namespaces import local_name
from faasrl.user_input import STRICT, load_yaml

MANIFEST_NAMES = ("manifest.yaml", "manifest.yml", "manifest.json")
FUNCTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # also the API's {name} path parameter
MAX_RETRY_ATTEMPTS = 2  # Lambda's default and limit for asynchronous invocations
MAX_EVENT_AGE_S = 6 * 3600  # Lambda's default and limit: six hours
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ManifestError(ValueError):
    """A manifest that cannot be read or does not validate; the message names the file and field."""


class NotOnLambda(ValueError):
    """A function asked to run on Lambda has no ``aws_lambda`` section naming where."""


class LambdaTarget(BaseModel):
    """The function's twin on AWS Lambda, or on anything serving Lambda's Invoke API (a faasrl
    gateway). Credentials come from boto3's standard chain, never from here: manifests are
    stored in Redis and served by the API."""

    model_config = STRICT

    function_name: str = Field(
        min_length=1, max_length=170, pattern=r"^[A-Za-z0-9_:.$-]+$",
        description="the Lambda function's name or ARN")
    qualifier: str | None = Field(None, min_length=1, max_length=128,
                                  pattern=r"^[A-Za-z0-9_$-]+$",
                                  description="version or alias (provisioned concurrency)")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$",
                               description="None: boto3's default region")
    endpoint_url: str | None = Field(None, pattern=r"^https?://",
                                     description="None: AWS; a faasrl gateway's URL to test")


class RayPlacement(BaseModel):
    """Where on a Ray cluster the function's containers may go (the Ray backend); beyond its
    cpu, memory_mb and gpu, which every backend reserves."""

    model_config = STRICT

    resources: dict[str, float] = Field(
        default_factory=dict, description="custom Ray resources each container holds "
                                          "(a node offers them: ray start --resources)")
    strategy: Literal["PACK", "SPREAD"] = Field(
        "SPREAD", description="SPREAD: across nodes, keeping them evenly busy; PACK: fill "
                              "nodes in turn (Ray's default)")
    node_label: dict[str, str] = Field(
        default_factory=dict, description="labels a node must carry (ray start --labels)")

    @field_validator("resources")
    @classmethod
    def _amounts(cls, resources: dict[str, float]) -> dict[str, float]:
        bad = [k for k, v in resources.items() if not k or v <= 0 or k in _RAY_BUILTIN]
        if bad:
            raise ValueError(f"custom resources need a name and an amount > 0, and cpu, gpu "
                             f"and memory are the manifest's own fields: {', '.join(bad)}")
        return resources


_RAY_BUILTIN = {"CPU", "GPU", "memory", "object_store_memory"}


class FunctionSpec(BaseModel):
    """A registered function: its code, its resource needs and its container lifecycle."""

    model_config = STRICT

    name: str = Field(pattern=FUNCTION_NAME)
    handler: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
        description="'module:function', imported inside the container",
    )
    image: str | None = Field(None, description="container image (Docker backend)")
    code_dir: str | None = Field(None, description="folder holding the handler (process backend)")
    code_sha256: str | None = Field(
        None, pattern=SHA256_PATTERN,
        description="an uploaded code archive (POST /v1/code), unpacked in the container at init")
    cpu: float = Field(1.0, gt=0, le=1024, description="cores reserved per container")
    cpu_max: float | None = Field(
        None, gt=0, le=1024, description="cores one invocation may use when its caller asks for "
        "more than cpu and the node has them free (a job's learner takes its actors' cores "
        "while they wait for it); needs max_concurrency 1; None: cpu")
    memory_mb: int = Field(512, ge=32, le=1 << 20, description="memory limit per container")
    gpu: float = Field(
        0, ge=0, le=64, description="GPUs per container: a whole number of devices, each its "
        "own; or a fraction < 1 of one device that containers asking for fractions share "
        "(its memory limited to the fraction, and its compute where NVIDIA MPS runs)")
    timeout_s: float = Field(60.0, gt=0, le=86400, description="longest run of one invocation")
    min_warm: int = Field(0, ge=0, le=1024, description="containers kept started ahead")
    keep_alive_s: float = Field(600.0, ge=0, description="idle seconds before reclaiming")
    max_concurrency: int = Field(1, ge=1, le=1024, description="invocations one container serves")
    reserved_concurrency: int | None = Field(
        None, ge=1, le=100_000,
        description="Lambda's reserved concurrency: invocations in flight at once that this "
                    "node keeps capacity for (other functions cannot take it), and also at "
                    "most this many in flight; None: no reservation")
    concurrency_limit: int | None = Field(
        None, ge=1, le=100_000,
        description="at most this many invocations in flight at once (across its containers), "
                    "with no capacity set aside; None: no limit")
    affinity: Literal["prefer", "wait"] = Field(
        "prefer", description="an invocation with an affinity key whose container is busy: "
        "'prefer' takes another one, 'wait' waits for it (the handler keeps state per key "
        "that another container would not have)")
    env: dict[str, str] = Field(default_factory=dict, description="environment for the handler")
    placement: Literal["local", "lambda"] = Field(
        "local", description="where invocations run unless the caller says otherwise")
    aws_lambda: LambdaTarget | None = Field(None, validate_default=True,
                                            description="where it runs on Lambda")
    ray: RayPlacement | None = Field(None, description="where on a Ray cluster its containers "
                                                       "go (Ray backend; others ignore it)")
    # Asynchronous invocations (Lambda's semantics; synchronous ones are never retried).
    maximum_retry_attempts: int = Field(
        MAX_RETRY_ATTEMPTS, ge=0, le=MAX_RETRY_ATTEMPTS,
        description="retries of a failed asynchronous invocation (with back-off); what still "
                    "fails lands in the function's dead-letter list")
    maximum_event_age_s: int = Field(
        MAX_EVENT_AGE_S, ge=60, le=MAX_EVENT_AGE_S,
        description="an asynchronous invocation older than this is not retried but "
                    "dead-lettered")
    on_success: str | None = Field(
        None, pattern=FUNCTION_NAME, description="a function of the same namespace invoked "
        "asynchronously with Lambda's destination record after an asynchronous success")
    on_failure: str | None = Field(
        None, pattern=FUNCTION_NAME, description="a function of the same namespace invoked "
        "asynchronously with Lambda's destination record once an asynchronous invocation is "
        "dead-lettered")

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"not valid environment variable names: {', '.join(sorted(bad))}")
        return env

    @field_validator("gpu")
    @classmethod
    def _whole_or_fraction(cls, gpu: float) -> float:
        if float(gpu).is_integer():
            return int(gpu)
        if gpu > 1:
            raise ValueError("more than one GPU is a whole number of devices (a fraction "
                             "shares one device: < 1)")
        return gpu

    @field_validator("cpu_max")
    @classmethod
    def _at_least_cpu(cls, cpu_max: float | None, info: ValidationInfo) -> float | None:
        cpu = info.data.get("cpu")
        if cpu_max is not None and cpu is not None and cpu_max < cpu:
            raise ValueError(f"{cpu_max:g} is below cpu ({cpu:g})")
        return cpu_max

    @field_validator("max_concurrency")
    @classmethod
    def _one_run_borrows(cls, max_concurrency: int, info: ValidationInfo) -> int:
        if info.data.get("cpu_max") is not None and max_concurrency > 1:
            raise ValueError("cpu_max needs max_concurrency 1: the cores lent to a run are its "
                             "process's threads")
        return max_concurrency

    @field_validator("on_success", "on_failure")
    @classmethod
    def _not_itself(cls, destination: str | None, info: ValidationInfo) -> str | None:
        if destination is not None and destination == info.data.get("name"):
            raise ValueError("a function cannot be its own destination (each invocation would "
                             "invoke it again)")
        return destination

    @field_validator("concurrency_limit")
    @classmethod
    def _one_concurrency_bound(cls, limit: int | None, info: ValidationInfo) -> int | None:
        if limit is not None and info.data.get("reserved_concurrency") is not None:
            raise ValueError("reserved_concurrency is also the function's limit: set one of "
                             "reserved_concurrency and concurrency_limit")
        return limit

    @field_validator("placement")
    @classmethod
    def _no_local_warm_on_lambda(cls, placement: str, info: ValidationInfo) -> str:
        if placement == "lambda" and info.data.get("min_warm"):
            raise ValueError("a function placed on Lambda keeps no local containers warm: set "
                             "min_warm to 0 (provisioned concurrency is set at deploy)")
        return placement

    @field_validator("aws_lambda")
    @classmethod
    def _lambda_target(cls, target: LambdaTarget | None, info: ValidationInfo
                       ) -> LambdaTarget | None:
        if target is None and info.data.get("placement") == "lambda":
            raise ValueError("placement 'lambda' needs this section (function_name, ...)")
        return target

    def lambda_target(self) -> LambdaTarget:
        """Where it runs on Lambda: its ``aws_lambda`` section, or NotOnLambda without one."""
        if self.aws_lambda is None:
            raise NotOnLambda(f"{local_name(self.name)!r} has no aws_lambda section: it cannot "
                              "run on Lambda (deploy it with 'faasrl deploy lambda', then name "
                              "the Lambda function in its manifest)")
        return self.aws_lambda


def renamed(spec: FunctionSpec, name: str) -> FunctionSpec:
    """``spec`` under another name, not validated again: inside the platform a function goes by
    its qualified name (``faasrl.namespaces.qualify``), whose '.' a manifest's name may not
    have; the API shows it back under its bare one."""
    return spec if spec.name == name else spec.model_copy(update={"name": name})


def load_manifest(path: str | Path) -> FunctionSpec:
    """Read a function's manifest from its folder (or the file itself).

    A manifest without ``code_dir`` gets its own folder, so ``functions/echo`` deploys as is.
    """
    path = Path(path).resolve()
    if path.is_dir():
        found = [path / n for n in MANIFEST_NAMES if (path / n).is_file()]
        if not found:
            raise ManifestError(f"{path}: no {' or '.join(MANIFEST_NAMES)} in this folder")
        path = found[0]
    if not path.is_file():
        raise ManifestError(f"{path}: no such file")
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML/JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: a manifest is a mapping of fields, got {type(data).__name__}")
    data.setdefault("code_dir", str(path.parent))
    try:
        return FunctionSpec.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ManifestError(f"{path}: {fields}") from exc
