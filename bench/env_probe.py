"""What the describe probe adds to a job's submit: ``POST /v1/jobs`` latency as a client sees
it, for a custom env (examples/custom-env) whose probe is cold (an env configuration never
described: each repetition changes the corridor's length) and cached, against a CartPole-v1
submit (its description cached after the first). An embedded platform on the process
backend; the actor container is warm for every measured submit (a first, unmeasured submit
starts it), and every job is deleted right after its submit so that no training competes.

    python bench/env_probe.py [--reps 5] [--out bench/results/env_probe.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.user_input import load_yaml

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom-env"
CARTPOLE = {"env_id": "CartPole-v1", "stop": {"max_rounds": 1}, "evaluation_episodes": 0}


def submit_s(client: Client, spec: dict[str, Any]) -> float:
    """One submit's wall time; its job is deleted after (outside the measurement)."""
    t0 = time.perf_counter()
    job = client.submit(spec)
    elapsed = time.perf_counter() - t0
    client.delete_job(job["id"])
    return elapsed


def measure(client: Client, reps: int) -> dict[str, list[float]]:
    spec = client.upload_env(load_yaml((EXAMPLE / "corridor.yaml").read_text()), base=EXAMPLE)
    spec = {**spec, "stop": {"max_rounds": 1}, "evaluation_episodes": 0}

    def corridor(length: int) -> dict[str, Any]:
        return {**spec, "env": {**spec["env"], "kwargs": {"length": length}}}

    first = {"cartpole, first submit (cold container and probe)": [submit_s(client, CARTPOLE)]}
    out: dict[str, list[float]] = {"cartpole (cached)": [], "custom env, cold probe": [],
                                   "custom env, cached": []}
    for i in range(reps):
        out["cartpole (cached)"].append(submit_s(client, CARTPOLE))
        out["custom env, cold probe"].append(submit_s(client, corridor(100 + i)))
        out["custom env, cached"].append(submit_s(client, corridor(100 + i)))
    return {**first, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="faasrl-bench-") as tmp:
        platform = EmbeddedPlatform(Settings(state_dir=Path(tmp), port=0,
                                             resume_jobs=False)).start()
        try:
            with platform.client() as client:
                runs = measure(client, args.reps)
        finally:
            platform.stop()
    base = statistics.median(runs["cartpole (cached)"])
    summary = {name: {"median_s": round(statistics.median(v), 4),
                      "vs_cartpole": round(statistics.median(v) / base, 2), "runs": v}
               for name, v in runs.items()}
    for name, s in summary.items():
        print(f"{name:52s} {s['median_s'] * 1000:8.1f} ms  x{s['vs_cartpole']:.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
