"""The virtual clock's calibration of a job: each role's duration as a + b·units.

A job on the virtual clock (``clock: virtual``) is timed by a calibration, not by what its
invocations measure, so that its order of events, and what it learns, does not depend on the
host's load (docs/virtual-clock.md). This measures one: it runs the job alone (one actor, one
learner) at two rollout lengths on a fresh embedded platform, takes every warm, successful
invocation's uncontended run time (its wait for a core taken out) against the work its result
reports (an actor's env steps, a learner's samples, the parameter function's aggregations;
the roles of the variant's workflow: ``--variant ppo-sync`` calibrates a synchronous learner's
whole update, not an asynchronous one's gradient),
fits a and b per role by least squares, and takes the spread of the points around the fit
(``sd``, of the log ratio; without it, equal durations keep invocations in lockstep). Prints
the ``virtual`` block to put in a job spec and writes it, with the points, to
bench/results/calibration-<env>.json.

    python bench/calibrate.py --env CartPole-v1 --variant stellaris
    python bench/calibrate.py --quick        # a tiny run: does it all work?
    python bench/calibrate.py --refit bench/calibrations/CartPole-v1-16cores.json
                                             # fit the points of an earlier run again
"""

from __future__ import annotations

import argparse
import json
import math
import platform as host
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from async_controllers import ENVS, QUICK, VARIANTS, job_spec
from jobrun import run_on, wait_for_zygote, write_results

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.jobs.clock import EXECUTION_ROLES, Role, counts_units, units

RESULTS = Path(__file__).resolve().parent / "results"


def fit(points: list[tuple[float, float]]) -> dict[str, float]:
    """a + b·x by least squares over (x, seconds), neither below zero."""
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    a, b = np.linalg.lstsq(np.stack([np.ones_like(x), x], axis=1), y, rcond=None)[0]
    if b < 0:
        a, b = y.mean(), 0.0
    elif a < 0:
        a, b = 0.0, float((x * y).sum() / max((x * x).sum(), 1e-12))
    fitted = {"a": round(float(a), 6), "b": round(float(b), 9)}
    return {**fitted, "sd": spread(points, fitted)}


def spread(points: list[tuple[float, float]], fitted: dict[str, float]) -> float:
    """The standard deviation of log(seconds / (a + b·x)) over the points."""
    logs = [math.log(s / m) for x, s in points
            if s > 0 and (m := fitted["a"] + fitted["b"] * x) > 0]
    return round(statistics.pstdev(logs), 4) if len(logs) > 1 else 0.0


def points(records: list[dict[str, Any]], role: Role) -> list[tuple[float, float]]:
    """(units, uncontended seconds) of the warm successful invocations of the role's mode (a
    learner's gradients, not its init)."""
    return [(units(role, r["result"]), max(0.0, r["run_s"] - (r.get("wait_s") or 0.0)))
            for r in records if r["status"] == "success" and not r.get("cold")
            and isinstance(r.get("result"), dict) and counts_units(role, r["result"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", choices=list(ENVS))
    parser.add_argument("--variant", default="stellaris", choices=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--env-backend", choices=["envpool", "gymnasium"],
                        help="what steps the envs (default: the platform's for the env)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--refit", type=Path, metavar="JSON",
                        help="run nothing: fit the points of this earlier output again")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.refit:
        earlier = json.loads(args.refit.read_text())
        calibration = {role: fit([tuple(p) for p in pts])
                       for role, pts in earlier["points"].items() if pts}
        print(json.dumps({"virtual": {"cores": 16, "calibration": calibration}}, indent=2))
        write_results(args.out or args.refit, {**earlier, "calibration": calibration})
        return
    sizes = (QUICK if args.quick else ENVS)[args.env]
    rounds = 2 if args.quick else args.rounds
    roles = EXECUTION_ROLES[VARIANTS[args.variant]["execution"]]
    seen: dict[Role, list[tuple[float, float]]] = {role: [] for role in roles}
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            wait_for_zygote(client)
            for steps in (sizes["steps_per_actor"], max(1, sizes["steps_per_actor"] // 2)):
                spec = job_spec(args.env, args.variant, 1,
                                {**sizes, "steps_per_actor": steps, "rounds": rounds},
                                actors=1, learners=1, eval_episodes=0,
                                env_backend=args.env_backend)
                run_on(client, spec, label=f"{args.env} alone, {steps} steps")
            for role in roles:
                # The built-in functions a variant runs are named as their roles.
                records = client.invocations(function=role, limit=1000)
                seen[role] = points(records, role)
    calibration = {role: fit(seen[role]) for role in roles if seen[role]}
    print(json.dumps({"virtual": {"cores": 16, "calibration": calibration}}, indent=2))
    out = args.out or RESULTS / f"calibration-{args.env.replace('/', '_')}.json"
    write_results(out, {"benchmark": "calibrate", "env_id": args.env, "variant": args.variant,
                        "quick": args.quick, "machine": host.node(), "calibration": calibration,
                        "points": seen})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
