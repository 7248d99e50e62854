"""Where DQN on Pong spends its CPU, faasrl against Stable-Baselines3: the split behind
``atari_peers.py --algorithm dqn``'s frames per second.

Both sides run that benchmark's setup (the zoo's Atari DQN cadence, faasrl's job in its
words, the built-in buffer deployed with room for its memory) for a fixed wall time, with the
warm-up shortened to ``--learning-starts`` env steps (the memory stays 100k) so that most of
the run is the phase the 30-minute run spends most of its time in: learning. On a machine
whose cores are all busy, frames per second is the cores over the CPU seconds a frame takes, so
each phase is reported as CPU seconds per 1,000 env steps, per part:

- faasrl, from each process's CPU time (``/proc``, all its threads): the actor containers
  (the emulator, the Q network's forward pass for each action, the edge priorities: two more
  forward passes per transition, the frames' compression), the buffer container (ingest,
  prioritized sampling, priority updates), the learner container (the gradient steps), the
  Redis server, and the platform process (gateway, invoker, the job's workflow);
- SB3, from its process's CPU time inside ``collect_rollouts`` (the emulator and acting: its
  epsilon-greedy skips the forward pass for a random action) and inside ``train`` (the
  gradient steps), both torch threads counted.

The warm-up is measured apart (env steps until the memory holds ``learning_starts``). faasrl
runs twice: with its Atari default, the learner lent its actors' cores while the replay ratio
holds them back (``lend_actor_cores``), and with the learner on its manifest's one core.

    python bench/dqn_pong_split.py [--seed 1] [--wall-s 300] [--learning-starts 20000] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import torch
from atari_peers import (
    ENV_ID,
    FRAME_SKIP,
    PONG_DQN_BUFFER,
    PONG_DQN_JOB,
    ZOO_DQN,
    ZOO_STEPS,
    sb3_dqn_atari,
)
from jobrun import wait_for_zygote, write_results
from rich.console import Console
from rich.table import Table
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.rl.envs import make_env

PLATFORM, REDIS, OTHER = "platform", "redis", "other"
CPU = dict[str, float]  # part -> CPU seconds


# --------------------------------------------------------------------------------- faasrl
def _cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def _faasrl_cpu(client: Client) -> CPU:
    """CPU seconds so far of every process of the embedded platform, by part."""
    me = psutil.Process()
    functions = {c["pid"]: name for name, pool in client.cluster()["functions"].items()
                 for c in pool["containers"] if c["pid"]}
    parts: CPU = {PLATFORM: _cpu_s(me)}
    for p in me.children(recursive=True):
        try:
            part = functions.get(p.pid) or (REDIS if "redis" in p.name() else OTHER)
            parts[part] = parts.get(part, 0.0) + _cpu_s(p)
        except psutil.NoSuchProcess:
            continue
    return parts


def _mark(client: Client, job_id: str) -> dict[str, Any]:
    job = client.job(job_id)
    return {"t": time.monotonic(), "env_steps": job["env_steps"],
            "learner_steps": job["algorithm_state"].get("learner_steps", 0),
            "cpu": _faasrl_cpu(client)}


def _phase(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The CPU per part, the wall time, env and gradient steps between two marks."""
    cpu = {k: b["cpu"].get(k, 0.0) - a["cpu"].get(k, 0.0) for k in b["cpu"]}
    return {"wall_s": b["t"] - a["t"], "env_steps": b["env_steps"] - a["env_steps"],
            "gradient_steps": b["learner_steps"] - a["learner_steps"], "cpu_s": cpu}


def faasrl_side(seed: int, learning_starts: int, wall_s: float, lend: bool) -> dict[str, Any]:
    """Warm-up and ``wall_s`` of learning of the benchmark's DQN job, marked as rounds close
    (a job's counters move then): the warm-up is round 0 (the memory filled, then its first
    ``steps_per_round`` gradient steps), learning the rounds that close in the next
    ``wall_s``."""
    hp = {**PONG_DQN_JOB["hyperparameters"], "learning_starts": learning_starts}
    spec = {"name": "split-dqn-pong", "algorithm": "dqn", "env_id": ENV_ID, "seed": seed,
            "controller": {"name": "fixed", "actors": 2}, **PONG_DQN_JOB,
            "hyperparameters": hp, "evaluation_episodes": 0, "lend_actor_cores": lend,
            "stop": {"max_rounds": None, "max_env_steps": ZOO_STEPS}}
    with tempfile.TemporaryDirectory() as state, \
            EmbeddedPlatform(Settings(state_dir=Path(state), port=0)) as platform, \
            platform.client() as client:
        wait_for_zygote(client)
        client.deploy(PONG_DQN_BUFFER)
        job = client.submit(spec)
        start = _mark(client, job["id"])
        warm = _after_round(client, job["id"], 0, timeout_s=1800)
        time.sleep(wall_s)
        end = _after_round(client, job["id"], client.job(job["id"])["round"], timeout_s=600)
        rows = client.job_metrics(job["id"])[warm["round"]:end["round"]]
        client.cancel_job(job["id"])
    return {"warm_up": _phase(start, warm), "learning": _phase(warm, end),
            "rows": {k: sum(r.get(k) or 0.0 for r in rows)
                     for k in ("learner_s", "learner_idle_s", "buffer_s", "gradient_steps")},
            "learner_cores": statistics.fmean(cores) if (cores := [
                r["learner_cores"] for r in rows if r.get("learner_cores")]) else None}


def _after_round(client: Client, job_id: str, closed: int, timeout_s: float) -> dict[str, Any]:
    """A mark as soon as the job's round ``closed`` has closed."""
    deadline = time.monotonic() + timeout_s
    while (job := client.job(job_id))["round"] <= closed:
        if job["status"] not in ("pending", "running") or time.monotonic() > deadline:
            raise RuntimeError(f"job {job['status']} before round {closed} closed: "
                               f"{job.get('error')}")
        time.sleep(0.05)
    return {**_mark(client, job_id), "round": job["round"]}


# ------------------------------------------------------------------------------------ SB3
class _Split(BaseCallback):
    """Marks the end of the warm-up and stops ``wall_s`` after it."""

    def __init__(self, learning_starts: int, wall_s: float, timers: CPU):
        super().__init__()
        self.learning_starts, self.wall_s, self.timers = learning_starts, wall_s, timers
        self.marks: list[dict[str, Any]] = []

    def mark(self) -> None:
        self.marks.append({"t": time.monotonic(), "env_steps": self.model.num_timesteps,
                           "learner_steps": self.model._n_updates,
                           "cpu": {**self.timers, "process": time.process_time()}})

    def _on_training_start(self) -> None:
        self.mark()

    def _on_step(self) -> bool:
        if len(self.marks) == 1 and self.num_timesteps >= self.learning_starts:
            self.mark()
        return len(self.marks) < 2 or time.monotonic() < self.marks[1]["t"] + self.wall_s


def _timed(timers: CPU, part: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return method(*args, **kwargs)
        finally:
            timers[part] += time.process_time() - t
    return timed


def sb3_side(seed: int, learning_starts: int, wall_s: float) -> dict[str, Any]:
    """The zoo's DQN with the same warm-up, its collect and train CPU timed."""
    env = make_vec_env(lambda: make_env(ENV_ID), n_envs=1, seed=seed)
    model = sb3_dqn_atari(env, seed, ZOO_STEPS)
    model.learning_starts = learning_starts
    timers = {"collect": 0.0, "train": 0.0}
    model.collect_rollouts = _timed(timers, "collect", model.collect_rollouts)
    model.train = _timed(timers, "train", model.train)
    split = _Split(learning_starts, wall_s, timers)
    model.learn(total_timesteps=ZOO_STEPS, callback=split)
    split.mark()
    phases = [_phase(a, b) for a, b in zip(split.marks, split.marks[1:], strict=False)]
    for p in phases:  # what is not in collect or train: learn()'s own loop
        p["cpu_s"][OTHER] = p["cpu_s"].pop("process") - p["cpu_s"]["collect"] \
            - p["cpu_s"]["train"]
    return {"warm_up": phases[0], "learning": phases[1]}


# -------------------------------------------------------------------------------- report
def _table(title: str, sides: dict[str, dict[str, Any]]) -> Table:
    table = Table("side", "part", "CPU s / 1k env steps", "share", title=title)
    for side, phase in sides.items():
        per_k = 1_000 / max(phase["env_steps"], 1)
        total = sum(phase["cpu_s"].values())
        for part, cpu in sorted(phase["cpu_s"].items(), key=lambda kv: -kv[1]):
            table.add_row(side, part, f"{cpu * per_k:.2f}", f"{cpu / total:.0%}")
        table.add_row(side, "total", f"{total * per_k:.2f}",
                      f"{total / phase['wall_s']:.2f} cores", style="bold")
        frames_per_s = FRAME_SKIP * phase["env_steps"] / phase["wall_s"]
        table.add_row(side, "wall", f"{phase['wall_s'] * per_k:.2f}",
                      f"{frames_per_s:,.0f} frames/s", style="bold")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wall-s", type=float, default=300.0,
                        help="each side's time past the warm-up")
    parser.add_argument("--learning-starts", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="a smoke run of seconds")
    parser.add_argument("--out", type=Path, default=Path("bench/results/dqn_pong_split.json"))
    args = parser.parse_args()
    torch.set_num_threads(2)  # SB3 trains on both cores, as atari_peers.py runs it
    starts, wall = (512, 10.0) if args.quick else (args.learning_starts, args.wall_s)
    console = Console()
    sides: dict[str, dict[str, Any]] = {}
    for side, lend in (("faasrl", True), ("faasrl, own core", False)):
        with console.status(side):
            sides[side] = faasrl_side(args.seed, starts, wall, lend)
    with console.status("SB3"):
        sides["SB3"] = sb3_side(args.seed, starts, wall)
    for phase in ("warm_up", "learning"):
        console.print(_table(f"{phase.replace('_', '-')}: CPU per part",
                             {side: figures[phase] for side, figures in sides.items()}))
    for side in ("faasrl", "faasrl, own core"):
        console.print(f"{side}, its rows while learning: {sides[side]['rows']}, "
                      f"learner cores {sides[side]['learner_cores']}")
    write_results(args.out, {"seed": args.seed, "learning_starts": starts, "wall_s": wall,
                             "zoo": ZOO_DQN, **sides})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
