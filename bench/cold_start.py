"""Cold start of the built-in PPO learner and actor on the process backend, with the zygote off
and on: container start -> first result, as a client sees it (a function that has never run,
invoked once), with the record's split into start + handler load (``init_s``) and the first run
(which for the learner's update includes torch's import of its compiler on the first optimizer).

Two embedded platforms run side by side, one per mode (``FAASRL_ZYGOTE``); repetitions
interleave them, alternating which goes first, so that machine drift hits both alike. Each
repetition is a new job's round 0 with every invocation on a function deployed under a new name:
the learner's ``init`` (builds and publishes the policy), an actor's ``rollout`` of it, and the
learner's ``update`` on that rollout.

    python bench/cold_start.py [--reps 10] [--quick] [--out bench/results/cold_start.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from faasrl.config import Settings
from faasrl.data import acl
from faasrl.embedded import EmbeddedPlatform

FUNCTIONS = Path(__file__).resolve().parents[1] / "functions"
MODES = {"new interpreter": False, "zygote": True}
FIELDS = ("client_s", "init_s", "run_s")


def cold(platform: EmbeddedPlatform, function: str, name: str, args: Any) -> dict[str, Any]:
    """Deploy ``function`` under a new name and invoke it once: its cold start."""
    manifest = {"name": name, "handler": "handler:main", "code_dir": str(FUNCTIONS / function),
                "cpu": 1, "memory_mb": 2048 if function == "actor" else 4096}
    with platform.client() as client:
        client.deploy(manifest)
        t0 = time.perf_counter()
        rec = client.invoke(name, args)
        elapsed = time.perf_counter() - t0
        client.delete(name)
    if rec["status"] != "success" or not rec["cold"]:
        raise RuntimeError(f"{name}: {rec}")
    return {"client_s": elapsed, "init_s": rec["init_s"], "run_s": rec["run_s"],
            "result": rec["result"]}


def repetition(platform: EmbeddedPlatform, tag: str, steps: int) -> dict[str, dict[str, Any]]:
    """One job's round 0, each step on a new container: the learner's init, an actor's
    rollout, the learner's update (a learner replaced mid-job: its first result is an update)."""
    job = {"id": f"cold-{tag}", "env_id": "CartPole-v1", "policy": None, "seed": 1,
           "envs_per_actor": 2, "steps_per_actor": steps, "hyperparameters": {"algorithm": "ppo"},
           "redis": acl.grant_new(platform.redis_url, f"cold-{tag}")}
    init = cold(platform, "learner", f"init-{tag}", {"mode": "init", "job": job})
    made = init.pop("result")
    job["policy"] = made["policy"]
    actor = cold(platform, "actor", f"actor-{tag}", {"mode": "rollout", "job": job, "round": 0,
                                                      "slot": 0, "version": 0})
    actor.pop("result")
    update = cold(platform, "learner", f"update-{tag}", {
        "mode": "update", "job": job, "round": 0, "version": 0, "slots": [0],
        "algorithm_state": made["algorithm_state"], "total_rounds": None})
    update.pop("result")
    return {"learner init": init, "actor rollout": actor, "learner update": update}


def wait_for_zygote(platform: EmbeddedPlatform, timeout_s: float = 300) -> None:
    """The zygote imports in the background; until it is ready, containers start without it."""
    backend = platform._app.state.services.invoker._backend  # the bench is in the gateway's process
    if not backend.zygote.wait_ready(timeout_s):
        raise RuntimeError("the zygote did not get ready (see its state dir's logs/zygote.log)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10, help="cold starts per function and mode")
    parser.add_argument("--steps", type=int, default=64, help="steps of the actor's first run")
    parser.add_argument("--quick", action="store_true", help="2 repetitions, 8 steps")
    parser.add_argument("--out", type=Path, default=Path("bench/results/cold_start.json"))
    args = parser.parse_args()
    reps, steps = (2, 8) if args.quick else (args.reps, args.steps)
    console = Console(width=150)

    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        fn: {mode: [] for mode in MODES} for fn in ("learner init", "actor rollout",
                                                     "learner update")}
    with ExitStack() as stack:
        platforms = {}
        for mode, zygote in MODES.items():
            state = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            platforms[mode] = stack.enter_context(EmbeddedPlatform(Settings(
                state_dir=state, port=0, register_builtins=False, zygote=zygote)))
        with console.status("waiting for the zygote's imports"):
            wait_for_zygote(platforms["zygote"])
        with console.status("cold starts"):
            for i in range(reps):
                order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    tag = f"{i}-{'z' if MODES[mode] else 'x'}"
                    for fn, sample in repetition(platforms[mode], tag, steps).items():
                        samples[fn][mode].append(sample)

    results: dict[str, Any] = {}
    table = Table("invocation", "mode", "cold start ms", "start+init ms", "first run ms",
                  title=f"cold start, median of {reps} (client: container start -> first result)")
    for fn, modes in samples.items():
        results[fn] = {mode: {f"{field}_median_ms": statistics.median(s[field] for s in runs) * 1e3
                              for field in FIELDS} | {"samples": runs}
                       for mode, runs in modes.items()}
        for mode in MODES:
            r = results[fn][mode]
            table.add_row(fn, mode, *(f"{r[f'{field}_median_ms']:.0f}" for field in FIELDS))
        off, on = results[fn]["new interpreter"], results[fn]["zygote"]
        results[fn]["speedup"] = {field: off[f"{field}_median_ms"] / on[f"{field}_median_ms"]
                                  for field in FIELDS}
    console.print(table)
    for fn in samples:
        s = results[fn]["speedup"]
        console.print(f"{fn}: the zygote's cold start is {s['client_s']:.1f}x faster "
                      f"(start+init {s['init_s']:.1f}x); target <= 100 ms: "
                      f"{results[fn]['zygote']['client_s_median_ms']:.0f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"quick": args.quick, "reps": reps, "actor_steps": steps,
                                    "results": results, "python": sys.version.split()[0]},
                                   indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
