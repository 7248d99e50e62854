"""A Pong PPO learner's update on the GPU against the one-core CPU learner, in the same run.

Times what the learner function runs per round (``faasrl.algorithms.ppo.update``: the Atari
family's defaults, the Nature CNN over 4x84x84 uint8 frames, Adam) on one round's batch: the
default job's actors (a fixed 2) x the family's 8 envs x 128 steps = 2,048 frames, 4 epochs of 4
minibatches. In-process, no platform and no emulator: the frames are synthetic (an update's cost
does not depend on pixel values), so no ROM is needed (ale-py is still imported, by faasrl's env
module, which the algorithms import). CUDA and the CPU (torch at one
thread, as a ``cpu: 1`` learner) are timed alternately, after a warm-up update each, and the
medians compared. Without CUDA only the CPU is timed (the ``--quick`` smoke check on CI).

    python bench/gpu_learner.py [--quick] [--repeats 5] [--actors 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from faasrl.algorithms import ppo  # the learner function's update
from faasrl.rl.policy import PolicySpec

PONG_ACTIONS = 6
FRAMES = (4, 84, 84)  # the Atari preprocessing's stack of 84x84 grey frames


def round_frames(actors: int) -> int:
    """One round's batch: each actor's envs x steps, as the Atari family's defaults give."""
    family = ppo.FAMILY_DEFAULTS["atari"]
    return actors * family["envs_per_actor"] * family["steps_per_actor"]


def synthetic_batch(frames: int, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """A batch of ``ppo.batch_schema``'s fields for Pong, random values."""
    g = torch.Generator().manual_seed(seed)
    batch = {"obs": torch.randint(0, 256, (frames, *FRAMES), dtype=torch.uint8, generator=g),
             "actions": torch.randint(0, PONG_ACTIONS, (frames,), generator=g),
             **{k: torch.randn(frames, generator=g)
                for k in ("logprobs", "values", "advantages", "returns")}}
    batch["logprobs"] = -batch["logprobs"].abs() - 1.0  # log-probabilities are negative
    return {k: v.to(device) for k, v in batch.items()}


class Learner:
    """The learner's model, optimizer and batch on one device, as the learner function has
    them after its first round."""

    def __init__(self, device: torch.device, frames: int):
        self.cfg = ppo.Config.model_validate(ppo.FAMILY_DEFAULTS["atari"]["hyperparameters"])
        spec = PolicySpec(obs_shape=FRAMES, obs_dtype="uint8", action_kind="discrete",
                          action_dim=PONG_ACTIONS)
        self.device = device
        self.model = ppo.make_model(spec, self.cfg).to(device)
        self.optimizer = ppo.make_optimizer(self.model, self.cfg)
        self.batch = synthetic_batch(frames, device)
        self.rounds = 0

    def update_s(self) -> float:
        """Seconds of one round's update (the stats' ``.item()`` calls synchronise already)."""
        generator = torch.Generator().manual_seed(self.rounds)
        self.rounds += 1
        t0 = time.perf_counter()
        ppo.update(self.model, self.optimizer, self.batch, self.cfg, generator=generator)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0


def measure(frames: int, repeats: int) -> dict[str, Any]:
    """Per device, the update times (a warm-up each first); CUDA where there is one."""
    torch.set_num_threads(1)  # the CPU learner's one core (its OMP_NUM_THREADS in a container)
    learners = [Learner(torch.device("cpu"), frames)]
    if torch.cuda.is_available():
        learners.insert(0, Learner(torch.device("cuda"), frames))
    for learner in learners:
        learner.update_s()  # CUDA's kernels and cuDNN's choices, the CPU's first allocations
    times: dict[str, list[float]] = {str(lr.device): [] for lr in learners}
    for _ in range(repeats):  # alternating, so that drift hits both alike
        for learner in learners:
            times[str(learner.device)].append(learner.update_s())
    return times


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f
                     if line.startswith("model name")), platform.machine())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one actor's batch (1,024 frames), 1 timed update per device")
    parser.add_argument("--repeats", type=int, default=5, help="timed updates per device")
    parser.add_argument("--actors", type=int, default=2, help="actors of the round (default "
                                                               "job: a fixed 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: bench/results/gpu_learner[_quick].json")
    args = parser.parse_args()
    actors, repeats = (1, 1) if args.quick else (args.actors, args.repeats)
    frames = round_frames(actors)
    times = measure(frames, repeats)
    medians = {device: statistics.median(ts) for device, ts in times.items()}
    cuda = medians.get("cuda")
    result = {
        "frames": frames, "actors": actors, "repeats": repeats, "quick": args.quick,
        "update_s": times, "median_s": medians,
        "cpu_over_cuda": medians["cpu"] / cuda if cuda else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "cpu_model": cpu_model(), "host": platform.node(),
        "torch": torch.__version__, "python": sys.version.split()[0],
    }
    out = args.out or Path(__file__).parent / "results" / (
        "gpu_learner_quick.json" if args.quick else "gpu_learner.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"Pong PPO update, {frames} frames: cpu (1 thread) {medians['cpu']:.2f} s"
          + (f", cuda {cuda:.3f} s ({medians['cpu'] / cuda:.1f}x)" if cuda else ", no CUDA here")
          + f" -> {out}")


if __name__ == "__main__":
    main()
