"""What a new user times: ``faasrl run examples/cartpole.yaml`` (``make run``: an embedded
platform started, the job run to a confirmed 475 and its final evaluation, the platform
stopped) against Stable-Baselines3's PPO with the same configuration and stopping rule
(``sb3_ppo.py``), each a whole process from exec to exit, interleaved in pairs so that drift
hits both alike. Both play seed 1, the job's own.

    python bench/cartpole_e2e.py [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from jobrun import write_results
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "faasrl run": [str(Path(sys.executable).parent / "faasrl"), "run",
                   str(ROOT / "examples" / "cartpole.yaml")],
    "SB3": [sys.executable, str(ROOT / "bench" / "sb3_ppo.py"), "--seed", "1"],
}


def timed(command: list[str]) -> tuple[float, str]:
    """Wall seconds from exec to exit, and the last line the process printed."""
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return wall, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/cartpole_e2e.json"))
    args = parser.parse_args()
    console = Console()
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    outputs: dict[str, list[str]] = {name: [] for name in COMMANDS}
    for pair in range(args.pairs):
        for name, command in COMMANDS.items():
            with console.status(f"pair {pair + 1}/{args.pairs}: {name}"):
                wall, last = timed(command)
            walls[name].append(wall)
            outputs[name].append(last)
    table = Table("command", "wall s (each)", "median s", title="CartPole-v1 to 475, whole process")
    for name, values in walls.items():
        table.add_row(name, "  ".join(f"{v:.1f}" for v in values),
                      f"{statistics.median(values):.1f}")
    console.print(table)
    ratio = statistics.median(walls["faasrl run"]) / statistics.median(walls["SB3"])
    console.print(f"faasrl run / SB3, medians: {ratio:.2f}x")
    sb3 = [json.loads(line) for line in outputs["SB3"]]
    write_results(args.out, {"walls": walls, "sb3_runs": sb3, "faasrl_last_lines": outputs[
        "faasrl run"], "wall_ratio_faasrl_over_sb3": ratio})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
