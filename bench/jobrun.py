"""Shared by the training benchmarks: run one job to its end on a fresh embedded platform."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.rl.seeds import Purpose, evaluation_seeds


def run_job(spec: dict[str, Any], *, label: str, timeout_s: float = 1800,
            schedulers_dir: Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The finished job and its metrics rows; raises if it did not succeed."""
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0, schedulers_dir=schedulers_dir)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            job = client.submit(spec)
            total = spec.get("stop", {}).get("max_rounds")
            columns = (TextColumn(f"{label:<28}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("rounds"), TimeElapsedColumn())
            with Progress(*columns, transient=True) as progress:
                task = progress.add_task(label, total=total)
                deadline = time.monotonic() + timeout_s
                while (job := client.job(job["id"]))["status"] in ("pending", "running"):
                    progress.update(task, completed=job["round"])
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{label}: job still running after {timeout_s} s")
                    time.sleep(0.2)
            if job["status"] != "succeeded":
                raise RuntimeError(f"{label}: job {job['status']}: {job.get('error')}")
            return job, client.job_metrics(job["id"])


def write_results(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "python": sys.version.split()[0]}, indent=2))


def evaluate_greedy(model: Any, env_id: str, job_seed: int, purpose: Purpose,
                    episodes: int) -> float:
    """A library model's greedy mean on the seeds a faasrl job with ``job_seed`` plays for
    ``purpose`` (episode i on its own seed), so both sides confirm on one set and report the
    held-out one."""
    import gymnasium as gym  # the benches that compare against a library have it

    env, returns = gym.make(env_id), []
    for seed in evaluation_seeds(job_seed, purpose, episodes):
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return sum(returns) / len(returns)
