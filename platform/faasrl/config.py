"""One Settings object for the whole platform, read from ``FAASRL_*`` environment variables."""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from faasrl.backends import BackendName
from faasrl.data.health import OUTAGE_MAX_S
from faasrl.invoker.invoker import InvokerConfig

# The repository's built-in functions, when faasrl runs from a checkout (editable install).
_CHECKOUT_FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


class Settings(BaseSettings):
    """Platform configuration; every field can be set as ``FAASRL_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="FAASRL_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    token: SecretStr | None = Field(None, description="bearer token; None turns auth off")
    redis_url: str | None = Field(None, description="external Redis; None starts the embedded one")
    redis_password_file: Path | None = Field(
        None, description="a file holding the password of the Redis at redis_url (the compose "
                          "cluster shares one between its Redis and the gateway)")
    redis_outage_max_s: float = Field(
        OUTAGE_MAX_S, gt=0, description="how long a running job waits, paused, for an "
                                        "unreachable Redis before it fails")
    state_dir: Path = Field(Path.home() / ".faasrl", description="pids, logs, embedded Redis data, "
                           "the records' spool and archive, job checkpoints")
    functions_dir: Path = Field(_CHECKOUT_FUNCTIONS, description="where built-in functions live")
    register_builtins: bool = Field(True, description="register functions_dir's at start")
    resume_jobs: bool = Field(True, description="resume interrupted jobs at start")
    schedulers_dir: Path | None = Field(None, description="saved MinionsRL schedulers; None = "
                                                          "<state_dir>/schedulers")
    env_layers_dir: Path | None = Field(
        None, description="env layers: the requirements.txt of env archives, installed once "
                          "per archive and read-only to functions; None = <state_dir>/env-layers")

    backend: BackendName = Field(
        "process", description="where this node's function containers come from")
    node_name: str = Field(default_factory=socket.gethostname,
                           description="labels this node's Docker containers and Ray actors; "
                                       "unique per gateway")
    docker_image: str = Field("faasrl/runtime:latest",
                              description="image of functions that name none")
    docker_gpu_image: str = Field("faasrl/runtime-gpu:latest",
                                  description="image of functions given GPUs that name none")
    docker_network: str = Field("faasrl", description="network the containers join (made if "
                                "missing); the compose cluster's, to reach its Redis")
    docker_builtins_dir: str = Field("/opt/faasrl/functions",
                                     description="where the images hold the built-in functions")
    docker_pids_limit: int = Field(1024, ge=64, description="processes+threads per container")
    docker_tmpfs_mb: int = Field(512, ge=16, description="the /tmp tmpfs (counts as memory)")
    docker_env_layers_source: str | None = Field(
        None, description="env_layers_dir as the Docker engine finds it, mounted read-only in "
                          "every container: a host path, or a volume's name (the compose "
                          "cluster's); None: env_layers_dir itself (a gateway on the host)")
    ray_address: str | None = Field(
        None, description="the Ray cluster to place containers on (host:port of its head, or "
                          "'auto'); None starts a local one-node cluster with the gateway")
    ray_namespace: str = Field("faasrl", min_length=1,
                               description="the Ray namespace the containers' actors are named in")
    ray_builtins_dir: str | None = Field(
        None, description="where Ray nodes hold the built-in functions (the runtime image's "
                          "/opt/faasrl/functions); None: functions_dir, as on a local cluster")
    function_redis_url: str | None = Field(
        None, description="the Redis URL containers get; None: redis_url (the embedded Redis: "
        "its bridge address for Docker containers)")
    function_user: str = Field(
        "10001:10001", pattern=r"^(\d+(:\d+)?)?$",
        description="uid[:gid] function processes run as when the gateway runs as root "
                    "(process backend); empty: the gateway's own")
    function_python: Path | None = Field(
        None, description="the interpreter function processes run (process backend); None: "
                          "the gateway's own")
    zygote: bool = Field(
        True, description="fork process and Ray containers from a zygote (one per Ray node) "
                          "that has imported what the built-in functions import (cold starts "
                          "without the imports); off: each starts as a new interpreter")
    stem_cells: int = Field(
        1, ge=0, le=64, description="generic runtime containers kept started and pre-imported "
        "per image (Docker backend), specialised for a function at its cold start; 0: none")
    stem_cell_memory_mb: int = Field(
        1024, ge=256, description="a stem cell's memory limit until it is specialised (it "
                                  "holds this much of the node's memory)")
    node_cpu: float | None = Field(None, gt=0, description="cores to hand out; None = all")
    node_memory_mb: int | None = Field(None, gt=0, description="memory to hand out; None = all")
    node_gpus: int | None = Field(None, ge=0, description="GPUs to hand out; None = NVML count")

    max_queue: int = Field(1000, ge=0, description="waiting invocations per function")
    queue_timeout_s: float = Field(300.0, gt=0, description="longest wait for a container")
    start_timeout_s: float = Field(InvokerConfig.start_timeout_s, gt=0,
                                   description="container start + init limit")
    env_probe_timeout_s: float = Field(30.0, gt=0, le=600, description="longest a submit's "
                                       "describe probe may take to import, build, reset and "
                                       "check the job's env")
    stop_grace_s: float = Field(InvokerConfig.stop_grace_s, ge=0,
                                description="SIGTERM to SIGKILL")
    timeout_grace_s: float = Field(InvokerConfig.timeout_grace_s, ge=0,
                                   description="past a run's deadline before the kill")
    maintain_interval_s: float = Field(InvokerConfig.maintain_interval_s, gt=0,
                                       description="keep-alive/min-warm tick")
    async_retry_base_s: float = Field(
        60.0, gt=0, le=3600, description="back-off before an asynchronous invocation's first "
        "retry; each further retry waits twice as long (Lambda: 1 minute, then 2)")
    record_ttl_s: int = Field(86400, gt=0, description="how long Redis keeps invocation records")
    record_max_mb: float = Field(512, gt=0, description="what invocation records may take of "
                                 "Redis's memory; the oldest leave first (to the archive)")
    record_max_count: int | None = Field(None, gt=0, description="invocation records Redis "
                                         "keeps at most; None: bounded by bytes and age only")
    container_logs_minutes: float = Field(
        InvokerConfig.container_logs_s / 60, gt=0,
        description="how long the gateway keeps, per container, what a function wrote "
                    "outside any invocation (its imports, threads between runs); an "
                    "invocation's own output is kept with its record")
    record_archive: bool = Field(True, description="keep records that leave Redis in rotated "
                                 "SQLite files in the state dir (records/), readable by id")
    record_archive_mb: float = Field(2048, gt=0, description="the archive's files at most; "
                                     "the oldest file goes first")
    record_archive_days: float = Field(7.0, gt=0, description="how long the archive keeps a "
                                       "record")
    memory_shed_at: float = Field(0.9, gt=0, le=1, description="share of the node's memory (or "
                                  "of Redis's maxmemory) in use past which the gateway sheds "
                                  "what can wait: new async invocations, pre-warming, archiving")
    max_payload_bytes: int = Field(6 * 1024 * 1024, gt=0, description="largest request body")

    # AWS Lambda: the backend that invokes functions placed on Lambda, and the gateway's own
    # Lambda Invoke API (POST /2015-03-31/functions/{name}/invocations).
    lambda_redis_url: SecretStr | None = Field(
        None, description="the Redis URL functions on Lambda get (rediss://:password@host for "
                          "TLS and a password); None: the gateway's own")
    lambda_max_concurrency: int = Field(256, ge=1, le=10_000,
                                        description="Lambda invocations in flight at most")
    lambda_throttle_retries: int = Field(4, ge=0, le=20, description="retries of a 429")
    lambda_api_access_key_id: str = Field("faasrl", min_length=1,
                                          description="access key id the Lambda API accepts")
    lambda_api_secret_access_key: SecretStr | None = Field(
        None, description="its secret; None: the bearer token; with neither, no auth")
    lambda_api_region: str = Field("us-east-1", description="the region in the API's ARNs")
    lambda_api_max_skew_s: float = Field(900.0, gt=0, description="clock skew a signature may "
                                                                  "have (AWS allows 15 min)")

    @property
    def scheduler_folder(self) -> Path:
        return self.schedulers_dir or self.state_dir / "schedulers"

    @property
    def record_archive_dir(self) -> Path:
        """Where the records archive's files are (``record_archive``)."""
        return self.state_dir / "records"

    @property
    def env_layers_folder(self) -> Path:
        return self.env_layers_dir or self.state_dir / "env-layers"
