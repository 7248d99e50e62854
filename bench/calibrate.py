"""The virtual clock's calibration of a job: each role's duration as a + b·units.

A job on the virtual clock (``clock: virtual``) is timed by a calibration, not by what its
invocations measure, so that its order of events, and what it learns, does not depend on the
host's load (docs/virtual-clock.md). This measures one: it runs the job alone (one actor, one
learner) at two rollout lengths on a fresh embedded platform, takes every warm, successful
invocation's uncontended run time (its wait for a core taken out) against the work its result
reports (an actor's env steps, a learner's samples, the parameter function's aggregations;
the roles of the variant's workflow: ``--variant ppo-sync`` calibrates a synchronous learner's
whole update, not an asynchronous one's gradient; ``--controller nitro`` has it measure the
loss Hessian too, whose seconds per sample per Lanczos step become the learner's ``hessian``),
fits a and b per role by least squares, and takes the spread of the points around the fit
(``sd``, of the log ratio; without it, equal durations keep invocations in lockstep). Prints
the ``virtual`` block to put in a job spec and writes it, with the points, to
bench/results/calibration-<env>.json.

    python bench/calibrate.py --env CartPole-v1 --variant stellaris
    python bench/calibrate.py --env CartPole-v1 --variant ppo-sync --controller nitro
    python bench/calibrate.py --variant dqn  # off-policy: actor, learner and buffer function
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
from faasrl.jobs.clock import EXECUTION_ROLES, Role, counts_units, hessian_units, units

RESULTS = Path(__file__).resolve().parent / "results"


def fit(points: list[tuple[float, float]]) -> dict[str, float]:
    """a + b·x by least squares over (x, seconds), neither below zero."""
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    a, b = np.linalg.lstsq(np.stack([np.ones_like(x), x], axis=1), y, rcond=None)[0]
    if b < 0:
        a, b = y.mean(), 0.0
    elif a < 0:
        a, b = 0.0, through_origin(points)
    fitted = {"a": round(float(a), 6), "b": round(float(b), 9)}
    return {**fitted, "sd": spread(points, fitted)}


def spread(points: list[tuple[float, float]], fitted: dict[str, float]) -> float:
    """The standard deviation of log(seconds / (a + b·x)) over the points."""
    logs = [math.log(s / m) for x, s in points
            if s > 0 and (m := fitted["a"] + fitted["b"] * x) > 0]
    return round(statistics.pstdev(logs), 4) if len(logs) > 1 else 0.0


# The off-policy variants' job: the algorithm's defaults but an early start (the learner trains
# after 256 transitions, so that a short run calibrates it). Their second run halves the batch
# as well as the rollout, so that the learner's samples and the buffer's rows vary too: a fit
# of a + b·units needs two sizes.
OFFPOLICY: dict[str, dict[str, Any]] = {
    "dqn": {"algorithm": "dqn", "hyperparameters": {"learning_starts": 256, "batch_size": 64}},
    "sac": {"algorithm": "sac", "hyperparameters": {"learning_starts": 256, "batch_size": 256}}}
OFFPOLICY_STEPS = {"full": 256, "quick": 32}  # an actor's env steps per rollout


def calibration_spec(env_id: str, variant: str, *, half: bool, quick: bool, rounds: int,
                     env_backend: str | None) -> dict[str, Any]:
    """The job run alone (one actor, one learner): its full size, or its rollouts (and an
    off-policy learner's batch) halved."""
    if variant in OFFPOLICY:
        steps = OFFPOLICY_STEPS["quick" if quick else "full"]
        job = OFFPOLICY[variant]
        hyper = dict(job["hyperparameters"])
        if half:
            steps, hyper["batch_size"] = steps // 2, hyper["batch_size"] // 2
        spec = {"name": f"calibrate-{variant}-{env_id}", "env_id": env_id, "seed": 1,
                "algorithm": job["algorithm"], "controller": {"name": "fixed", "actors": 1},
                "steps_per_actor": steps, "hyperparameters": hyper,
                "stop": {"max_rounds": rounds}, "evaluation_episodes": 0}
        return spec if env_backend is None else {**spec, "env_backend": env_backend}
    sizes = (QUICK if quick else ENVS)[env_id]
    steps = max(1, sizes["steps_per_actor"] // 2) if half else sizes["steps_per_actor"]
    return job_spec(env_id, variant, 1, {**sizes, "steps_per_actor": steps, "rounds": rounds},
                    actors=1, learners=1, eval_episodes=0, env_backend=env_backend)


def fitted(seen: dict[Role, list[tuple[float, float]]], hessians: list[tuple[float, float]]
           ) -> dict[Role, dict[str, float]]:
    """Each role's a, b and sd; the learner's ``hessian`` where it measured one."""
    calibration = {role: fit(pts) for role, pts in seen.items() if pts}
    if hessians and "learner" in calibration:
        calibration["learner"]["hessian"] = round(through_origin(hessians), 12)
    return calibration


def through_origin(points: list[tuple[float, float]]) -> float:
    """b of b·x by least squares over (x, seconds): a fit with no intercept (a Hessian's
    seconds per product, or a role's when its intercept would come out below zero)."""
    return float(sum(x * y for x, y in points) / max(sum(x * x for x, _ in points), 1e-12))


def warm_results(records: list[dict[str, Any]], role: Role) -> list[dict[str, Any]]:
    """The warm successful invocations of the role's mode (a learner's updates, not its
    init)."""
    return [r for r in records if r["status"] == "success" and not r.get("cold")
            and isinstance(r.get("result"), dict) and counts_units(role, r["result"])]


def points(records: list[dict[str, Any]], role: Role) -> list[tuple[float, float]]:
    """(units, uncontended seconds) of the role's warm invocations; a learner's Hessian, which
    ``hessian_points`` times, taken out."""
    return [(units(role, r["result"]),
             max(0.0, r["run_s"] - (r.get("wait_s") or 0.0) - _hessian_s(r["result"])))
            for r in warm_results(records, role)]


def hessian_points(records: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(Hessian-vector products, seconds) of the learner's updates that measured a Hessian."""
    return [(hessian_units("learner", r["result"]), _hessian_s(r["result"]))
            for r in warm_results(records, "learner") if r["result"].get("hessian")]


def _hessian_s(result: dict[str, Any]) -> float:
    return float(result["hessian"]["seconds"]) if result.get("hessian") else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=list(ENVS),
                        help="default: Hopper-v5 for sac, CartPole-v1 for the others")
    parser.add_argument("--variant", default="stellaris", choices=[*VARIANTS, *OFFPOLICY])
    parser.add_argument("--controller", choices=["fixed", "nitro"], default="fixed",
                        help="nitro: a synchronous learner measures the loss Hessian each round")
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
        calibration = fitted({role: [tuple(p) for p in pts]
                              for role, pts in earlier["points"].items()},
                             [tuple(p) for p in earlier.get("hessian_points", [])])
        print(json.dumps({"virtual": {"cores": 16, "calibration": calibration}}, indent=2))
        write_results(args.out or args.refit, {**earlier, "calibration": calibration})
        return
    env_id = args.env or ("Hopper-v5" if args.variant == "sac" else "CartPole-v1")
    rounds = 2 if args.quick else args.rounds
    execution = ("offpolicy" if args.variant in OFFPOLICY
                 else VARIANTS[args.variant]["execution"])
    if args.controller == "nitro" and execution != "sync":
        parser.error("--controller nitro needs a synchronous variant (ppo-sync)")
    roles = EXECUTION_ROLES[execution]
    seen: dict[Role, list[tuple[float, float]]] = {role: [] for role in roles}
    hessians: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            wait_for_zygote(client)
            for half in (False, True):
                spec = calibration_spec(env_id, args.variant, half=half, quick=args.quick,
                                        rounds=rounds, env_backend=args.env_backend)
                if args.controller == "nitro":  # one actor, as the fixed controller's
                    spec["controller"] = {"name": "nitro", "min_actors": 1, "max_actors": 1}
                run_on(client, spec, label=f"{env_id} alone, {spec['steps_per_actor']} steps")
            for role in roles:
                # The built-in functions a variant runs are named as their roles.
                records = client.invocations(function=role, limit=1000)
                seen[role] = points(records, role)
                if role == "learner":
                    hessians = hessian_points(records)
    calibration = fitted(seen, hessians)
    print(json.dumps({"virtual": {"cores": 16, "calibration": calibration}}, indent=2))
    out = args.out or RESULTS / f"calibration-{env_id.replace('/', '_')}.json"
    write_results(out, {"benchmark": "calibrate", "env_id": env_id, "variant": args.variant,
                        "controller": args.controller, "quick": args.quick,
                        "machine": host.node(), "calibration": calibration, "points": seen,
                        "hessian_points": hessians})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
