"""One Settings object for the whole platform, read from ``FAASRL_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# The repository's built-in functions, when faasrl runs from a checkout (editable install).
_CHECKOUT_FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


class Settings(BaseSettings):
    """Platform configuration; every field can be set as ``FAASRL_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="FAASRL_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    token: SecretStr | None = Field(None, description="bearer token; None turns auth off")
    redis_url: str | None = Field(None, description="external Redis; None starts the embedded one")
    state_dir: Path = Field(Path.home() / ".faasrl", description="pids, logs, embedded Redis data")
    functions_dir: Path = Field(_CHECKOUT_FUNCTIONS, description="where built-in functions live")
    register_builtins: bool = Field(True, description="register functions_dir's at start")
    resume_jobs: bool = Field(True, description="resume interrupted jobs at start")
    schedulers_dir: Path | None = Field(None, description="saved MinionsRL schedulers; None = "
                                                          "<state_dir>/schedulers")

    backend: Literal["process"] = "process"
    node_cpu: float | None = Field(None, gt=0, description="cores to hand out; None = all")
    node_memory_mb: int | None = Field(None, gt=0, description="memory to hand out; None = all")
    node_gpus: int | None = Field(None, ge=0, description="GPUs to hand out; None = NVML count")

    max_queue: int = Field(1000, ge=0, description="waiting invocations per function")
    queue_timeout_s: float = Field(300.0, gt=0, description="longest wait for a container")
    start_timeout_s: float = Field(60.0, gt=0, description="container start + init limit")
    stop_grace_s: float = Field(2.0, ge=0, description="SIGTERM to SIGKILL")
    timeout_grace_s: float = Field(1.0, ge=0, description="past a run's deadline before the kill")
    maintain_interval_s: float = Field(0.25, gt=0, description="keep-alive/min-warm tick")
    record_ttl_s: int = Field(86400, gt=0, description="how long invocation records are kept")
    max_payload_bytes: int = Field(6 * 1024 * 1024, gt=0, description="largest request body")

    @property
    def scheduler_folder(self) -> Path:
        return self.schedulers_dir or self.state_dir / "schedulers"
