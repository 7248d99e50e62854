"""Long-haul link benchmark: where should the replay memory sit when actors and learner are far
apart? DQN on CartPole-v1, three placements under the same seeds and the same wall budget:

(a) edge-side PER: Redis, actors and the buffer function at the edge, the learner behind the
    slow link: only sampled batches, the learner's new priorities and its published weights
    cross (the long-haul paper's proposal);
(b) Ape-X-style baseline: the replay memory at the learner site: Redis, buffer and learner
    there, the actors behind the link: every experience crosses, and the weights actors pull;
(c) uniform replay at the edge: (a) with ``alpha = 0``.

The paper runs Breakout; Atari DQN does not converge within minutes on this 2-core machine, so
this runs CartPole-v1, where a transition is ~50 bytes against Atari's ~56 KB of frames: expect
published and pulled weights, not experiences, to dominate what crosses the link here.

The link is ``bench/link.py``'s proxy (the kernel has no netem, so the delay is simulated in
user space; its rate limit is what a ``tbf`` would add, so no network namespace is used), run
as its own process so that its event loop does not share a GIL with the gateway and the job
driver. A function is placed "at the far site" by registering a copy of the built-in whose
``FAASRL_REDIS_URL`` points at the proxy; the driver stays next to Redis (it is the data plane
that the link separates, not the control plane). Every run gets a fresh embedded platform.

Reported per placement (mean over seeds; per-seed values in the JSON): bytes across the link
(the proxy's counters, both directions), the learner's idle time, gradient and env steps done
within the budget (a far learner publishes more slowly, far actors step more slowly: both show
up here), the loss over the last quarter of rounds, the final greedy evaluation, and the mean
priority of what crossed the link (a, c: the sampled batches; b: every pushed experience, with
the priority its actor computed) over the first and the last quarter of rounds; then a/b for
loss and priority as the paper reports them (loss 26 % of the baseline, priority 3.92x, 26.1x
early). Loss and priorities are in return units: a policy that got further sees larger targets
and larger TD errors, so read them next to the steps done and the evaluation.

    python bench/longhaul.py [--seeds 1 2 3] [--budget-s 240] [--delay-ms 25] [--rate-mbit 100]
    python bench/longhaul.py --quick     # one seed, a 60 s budget: a smoke run
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from jobrun import write_results
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.data.keys import optimizer_keys, params_key
from faasrl.embedded import EmbeddedPlatform
from faasrl.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
LINK = Path(__file__).with_name("link.py")
ACTORS = 2  # the fewest with Ape-X's spread of epsilons; the machine has two cores in all
STEPS_PER_ROUND = 64  # gradient steps per row: short rounds, so quarters have several rows
EVAL_EPISODES = 10
QUICK_BUDGET_S = 60.0
OVERRUN_S = 300.0  # past the budget: cold starts, the last round, the evaluation
PROXY_START_S = 15.0
PRIORITY_ROW_BYTES = 20  # a priority update's row: slot and generation (int64), |delta| (float32)
PAPER = {"loss_a_over_b": 0.26, "priority_a_over_b_late": 3.92,
         "priority_a_over_b_early": 26.1}


@dataclass(frozen=True)
class Placement:
    key: str
    label: str
    far: str  # the built-in function placed behind the link: "learner" or "actor"
    alpha: float | None  # None: DQN's default prioritization (0.6)
    transferred: str  # the row column holding the mean priority of what crossed the link

    @property
    def where(self) -> str:
        return "learner far" if self.far == "learner" else "actors far"


PLACEMENTS = (
    Placement("a", "edge PER", "learner", None, "sampled_priority_mean"),
    Placement("b", "Ape-X", "actor", None, "edge_priority_mean"),
    Placement("c", "edge uniform", "learner", 0.0, "sampled_priority_mean"),
)


@contextmanager
def slow_link(target: tuple[str, int], delay_ms: float, rate_mbit: float
              ) -> Iterator[tuple[int, dict[str, int]]]:
    """The proxy as a child process: yields (its port, a dict that holds its byte counters
    once the block has ended)."""
    proc = subprocess.Popen(
        [sys.executable, str(LINK), "--listen", "127.0.0.1:0",
         "--target", f"{target[0]}:{target[1]}", "--delay-ms", f"{delay_ms:g}",
         "--rate-mbit", f"{rate_mbit:g}"], stdout=subprocess.PIPE, text=True)
    counters: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the link proxy exited with {proc.wait(PROXY_START_S)}")
        yield json.loads(line)["port"], counters
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=PROXY_START_S)
        if out.strip():
            counters.update(json.loads(out.strip().splitlines()[-1]))


def job_spec(placement: Placement, far_function: str, seed: int, budget_s: float
             ) -> dict[str, Any]:
    """DQN's CartPole defaults, short rounds, the wall budget, and the far function."""
    hp: dict[str, Any] = {"algorithm": "dqn", "steps_per_round": STEPS_PER_ROUND}
    if placement.alpha is not None:
        hp["alpha"] = placement.alpha
    return {"name": f"longhaul-{placement.key}-{seed}", "algorithm": "dqn",
            "execution": "offpolicy", "env_id": "CartPole-v1", "seed": seed,
            "controller": {"name": "fixed", "actors": ACTORS}, "hyperparameters": hp,
            "stop": {"max_wall_s": budget_s, "max_rounds": 1_000_000},
            "evaluation_episodes": EVAL_EPISODES, f"{placement.far}_function": far_function}


def wait_for(client: Client, job_id: str, label: str, budget_s: float) -> dict[str, Any]:
    """The finished job, with a progress bar over its budget; raises unless it succeeded."""
    columns = (TextColumn(f"{label:<36}"), BarColumn(), TextColumn("{task.fields[rounds]} rounds"),
               TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(label, total=budget_s, rounds=0)
        t0 = time.monotonic()
        while (job := client.job(job_id))["status"] in ("pending", "running"):
            elapsed = time.monotonic() - t0
            progress.update(task, completed=min(elapsed, budget_s), rounds=job["round"])
            if elapsed > budget_s + OVERRUN_S:
                raise TimeoutError(f"{label}: job still running after {elapsed:.0f} s")
            time.sleep(0.5)
    if job["status"] != "succeeded":
        raise RuntimeError(f"{label}: job {job['status']}: {job.get('error')}")
    return job


def quarter_mean(rows: list[dict[str, Any]], key: str, *, late: bool) -> float | None:
    """``key``'s mean over the first (or last) quarter of rounds, rows without it skipped."""
    n = max(1, len(rows) // 4)
    values = [r[key] for r in (rows[-n:] if late else rows[:n]) if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def run(placement: Placement, seed: int, args: argparse.Namespace, budget_s: float
        ) -> dict[str, Any]:
    """One job on a fresh platform with ``placement``'s far function behind a fresh link."""
    label = f"({placement.key}) {placement.label}, {placement.where}, seed {seed}"
    with tempfile.TemporaryDirectory() as state, \
            EmbeddedPlatform(Settings(state_dir=Path(state), port=0)) as platform, \
            platform.client() as client:
        assert platform.redis_url is not None
        where = urlsplit(platform.redis_url)
        assert where.hostname is not None and where.port is not None
        with slow_link((where.hostname, where.port), args.delay_ms, args.rate_mbit) \
                as (port, link):
            far = f"{placement.far}-far"
            builtin = load_manifest(ROOT / "functions" / placement.far)
            client.deploy(builtin.model_copy(update={
                "name": far, "env": {**builtin.env,
                                     "FAASRL_REDIS_URL": f"redis://127.0.0.1:{port}/0"}}))
            job = client.submit(job_spec(placement, far, seed, budget_s))
            job = wait_for(client, job["id"], label, budget_s)
            rows = client.job_metrics(job["id"])
        with redis.Redis.from_url(platform.redis_url) as r:  # one version's blobs, for the check
            weights = r.strlen(params_key(job["id"], job["version"]))
            optimizer = r.strlen(optimizer_keys(job["id"])[0])

    up, down = link["bytes_up"], link["bytes_down"]
    return {
        "seed": seed, "rounds": job["round"], "stop_reason": job["stop_reason"],
        "wall_s": job["wall_s"], "link_bytes_up": up, "link_bytes_down": down,
        "link_bytes": up + down, "learner_idle_s": total(rows, "learner_idle_s"),
        "gradient_steps": total(rows, "gradient_steps"), "env_steps": job["env_steps"],
        "loss_late": quarter_mean(rows, "loss", late=True),
        "eval_return": job["evaluation"]["mean"] if job["evaluation"] else None,
        "priority_early": quarter_mean(rows, placement.transferred, late=False),
        "priority_late": quarter_mean(rows, placement.transferred, late=True),
        **{f"{column}_{when}": quarter_mean(rows, column, late=when == "late")
           for column in ("sampled_priority_mean", "edge_priority_mean")
           for when in ("early", "late")},
        "weights_bytes": weights, "optimizer_bytes": optimizer,
        "bytes_check": bytes_check(placement, job, rows, up, down, weights, optimizer),
    }


def total(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r.get(key) or 0 for r in rows)


def bytes_check(placement: Placement, job: dict[str, Any], rows: list[dict[str, Any]],
                up: int, down: int, weights: int, optimizer: int) -> dict[str, Any]:
    """The proxy's counters against what the rows and the published blobs account for."""
    if placement.far == "learner":
        # Down: the sampled batches the rows count, plus the far learner's first load of
        # version 0 (it keeps later versions warm), RESP framing and small replies (the update
        # marker). Up: every train call publishes the weights (online + target) and writes its
        # new priorities (slot, generation, |delta|: 20 bytes a sampled row), a round's last
        # call the optimizer state too; init publishes version 0's weights alone. A sample
        # drawn in the last round and a learner call in flight at the stop make the rest.
        sampled = total(rows, "bytes_to_learner")
        rows_per_step = job["spec"]["hyperparameters"]["batch_size"]
        expected_up = weights + job["version"] * weights + len(rows) * optimizer \
            + total(rows, "gradient_steps") * rows_per_step * PRIORITY_ROW_BYTES
        return {"rows_bytes_to_learner": sampled, "down_over_rows": down / max(1.0, sampled),
                "expected_down": sampled + weights, "expected_up": expected_up,
                "down_over_expected": down / max(1.0, sampled + weights),
                "up_over_expected": up / max(1.0, expected_up)}
    # Up: the experiences the rows count, plus each XADD's field names and RESP framing.
    # Down: the weights an actor call pulls when the learner published since its last one, the
    # final evaluation's pull, and a GET of the latest version per call.
    pushed = total(rows, "bytes_from_actors")
    return {"rows_bytes_from_actors": pushed, "up_over_rows": up / max(1.0, pushed),
            "actor_calls": int(total(rows, "actor_rollouts")) + 1,
            "weight_pulls_implied": down / max(1, weights)}


# (key, the table's label, its format); ratios a/b are taken of each
METRICS = (
    ("link_bytes_up", "link up MB", "mb"), ("link_bytes_down", "link down MB", "mb"),
    ("link_bytes", "link total MB", "mb"), ("learner_idle_s", "learner idle s", ".1f"),
    ("gradient_steps", "gradient steps", ",.0f"), ("env_steps", "env steps", ",.0f"),
    ("loss_late", "loss late", ".3g"), ("eval_return", "eval return", ".1f"),
    ("priority_early", "priority early", ".3g"), ("priority_late", "priority late", ".3g"),
)
PAPER_ROWS = {"loss_late": "loss_a_over_b", "priority_late": "priority_a_over_b_late",
              "priority_early": "priority_a_over_b_early"}


def means(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, _, _ in METRICS:
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = statistics.fmean(values) if values else None
    return out


def ratio(x: float | None, y: float | None) -> float | None:
    return None if x is None or not y else x / y


def fmt(value: float | None, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.1f}" if spec == "mb" else format(value, spec)


def describe_bytes(placement: Placement, r: dict[str, Any]) -> str:
    check, mb = r["bytes_check"], 1e6
    head = f"({placement.key}) seed {r['seed']}: "
    if placement.far == "learner":
        return (head + f"down {r['link_bytes_down'] / mb:.2f} MB = "
                f"{check['down_over_rows']:.2f}x the sampled batches in the rows "
                f"({check['rows_bytes_to_learner'] / mb:.2f} MB), "
                f"{check['down_over_expected']:.2f}x with the first weight load; up "
                f"{r['link_bytes_up'] / mb:.1f} MB = {check['up_over_expected']:.2f}x the "
                f"publishes (weights {r['weights_bytes'] / mb:.2f} MB each, optimizer "
                f"{r['optimizer_bytes'] / mb:.2f} MB a round) and priorities")
    return (head + f"up {r['link_bytes_up'] / mb:.2f} MB = {check['up_over_rows']:.2f}x the "
            f"experiences in the rows ({check['rows_bytes_from_actors'] / mb:.2f} MB); down "
            f"{r['link_bytes_down'] / mb:.1f} MB = {check['weight_pulls_implied']:.0f} weight "
            f"pulls of {r['weights_bytes'] / mb:.2f} MB in {check['actor_calls']} actor calls")


def report(console: Console, runs: dict[str, list[dict[str, Any]]], title: str
           ) -> tuple[dict[str, dict[str, float | None]], dict[str, float | None]]:
    """Print the table, the ratios and the bytes check; returns (means, ratios)."""
    summary = {key: means(values) for key, values in runs.items()}
    a, b, c = summary["a"], summary["b"], summary["c"]
    table = Table("mean over seeds", *(f"({p.key}) {p.label}\n{p.where}" for p in PLACEMENTS),
                  "a/b", "paper\na/b", title=title,
                  caption="early, late: the first, the last quarter of rounds; priority: the "
                          "mean of what crossed the link (a, c: sampled batches, b: every "
                          "experience); (c) samples uniformly (alpha 0)")
    for key, label, spec in METRICS:
        paper = PAPER.get(PAPER_ROWS.get(key, ""))
        table.add_row(label, *(fmt(summary[p.key][key], spec) for p in PLACEMENTS),
                      fmt(ratio(a[key], b[key]), ".2f"), fmt(paper, ".3g"))
    console.print(table)
    ratios = {"loss_a_over_b": ratio(a["loss_late"], b["loss_late"]),
              "priority_a_over_b_late": ratio(a["priority_late"], b["priority_late"]),
              "priority_a_over_b_early": ratio(a["priority_early"], b["priority_early"]),
              "link_bytes_a_over_b": ratio(a["link_bytes"], b["link_bytes"]),
              "loss_a_over_c": ratio(a["loss_late"], c["loss_late"]),
              "priority_a_over_c_late": ratio(a["priority_late"], c["priority_late"])}
    console.print(f"a/c, PER against uniform replay at the edge: loss "
                  f"{fmt(ratios['loss_a_over_c'], '.2f')}, priority late "
                  f"{fmt(ratios['priority_a_over_c_late'], '.2f')}x")
    console.print("bytes across the link against what the rows account for:")
    for p in PLACEMENTS:
        for r in runs[p.key]:
            console.print("  " + describe_bytes(p, r))
    return summary, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget-s", type=float, default=240.0, help="wall budget per run")
    parser.add_argument("--delay-ms", type=float, default=25.0, help="one-way delay")
    parser.add_argument("--rate-mbit", type=float, default=100.0, help="per direction")
    parser.add_argument("--quick", action="store_true",
                        help=f"one seed, a {QUICK_BUDGET_S:g} s budget: a smoke run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "longhaul.json")
    args = parser.parse_args()
    seeds, budget_s = (args.seeds[:1], QUICK_BUDGET_S) if args.quick \
        else (args.seeds, args.budget_s)
    console = Console()
    runs: dict[str, list[dict[str, Any]]] = {p.key: [] for p in PLACEMENTS}
    for seed in seeds:  # interleaved, so drift hits every placement alike
        for placement in PLACEMENTS:
            r = run(placement, seed, args, budget_s)
            runs[placement.key].append(r)
            console.print(f"({placement.key}) {placement.label}, seed {seed}: {r['rounds']} "
                          f"rounds, {r['gradient_steps']:,.0f} gradient steps, eval "
                          f"{fmt(r['eval_return'], '.1f')}, {r['link_bytes'] / 1e6:.1f} MB "
                          "across the link")

    title = (f"DQN CartPole-v1, {args.delay_ms:g} ms one way, {args.rate_mbit:g} Mbit/s, "
             f"{budget_s:g} s a run, seeds {' '.join(map(str, seeds))}")
    summary, ratios = report(console, runs, title)
    write_results(args.out, {
        "settings": {"seeds": seeds, "budget_s": budget_s, "delay_ms": args.delay_ms,
                     "rate_mbit": args.rate_mbit, "actors": ACTORS,
                     "steps_per_round": STEPS_PER_ROUND, "evaluation_episodes": EVAL_EPISODES,
                     "env_id": "CartPole-v1", "algorithm": "dqn"},
        "placements": {p.key: f"{p.label}, {p.where}" for p in PLACEMENTS},
        "runs": runs, "means": summary, "ratios": ratios, "paper": PAPER})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
