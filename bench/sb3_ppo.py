"""Stable-Baselines3's PPO on CartPole-v1 with the ``make run`` job's configuration and stopping
rule (see ``ppo_cartpole.py``): the library side of both CartPole comparisons. Run alone, it is
the whole process a user of the library times against ``faasrl run examples/cartpole.yaml``
(``cartpole_e2e.py``), so it imports nothing of the platform beyond the evaluation seeds.

    python bench/sb3_ppo.py [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch
from library_eval import evaluate_greedy
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

TARGET, WINDOW, EVAL_EPISODES, CONFIRM_GAP, MAX_UPDATES = 475.0, 20, 20, 5, 300
ENVS, STEPS, EPOCHS, MINIBATCHES, LR = 8, 128, 4, 4, 1e-3


class _ConfirmedTarget(BaseCallback):
    """Stops ``learn()`` by faasrl's rule (see the module docstring)."""

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed
        self.updates, self.next_confirm, self.confirmed = 0, 0, False

    def _on_step(self) -> bool:
        return not self.confirmed  # False ends learn()

    def _on_rollout_end(self) -> None:
        self.updates += 1

    def _on_rollout_start(self) -> None:
        buffer = self.model.ep_info_buffer
        recent = [ep["r"] for ep in list(buffer)[-WINDOW:]]
        if len(recent) < WINDOW or statistics.fmean(recent) < TARGET:
            return
        if self.updates < self.next_confirm:
            return
        mean = evaluate_greedy(self.model, "CartPole-v1", self.seed, "confirmation",
                               EVAL_EPISODES)
        if mean >= TARGET:
            self.confirmed = True
        else:
            self.next_confirm = self.updates + CONFIRM_GAP


def sb3_run(seed: int) -> dict[str, Any]:
    envs = make_vec_env("CartPole-v1", n_envs=ENVS, seed=seed)
    model = PPO("MlpPolicy", envs, n_steps=STEPS, batch_size=ENVS * STEPS // MINIBATCHES,
                n_epochs=EPOCHS, learning_rate=lambda progress: LR * progress, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                seed=seed, device="cpu")
    callback = _ConfirmedTarget(seed)
    t0 = time.perf_counter()
    model.learn(total_timesteps=MAX_UPDATES * ENVS * STEPS, callback=callback)
    learn_s = time.perf_counter() - t0
    # As faasrl: the final version is evaluated at the end, on the held-out seeds.
    held_out = evaluate_greedy(model, "CartPole-v1", seed, "final", EVAL_EPISODES)
    return {"wall_s": time.perf_counter() - t0, "env_steps": int(model.num_timesteps),
            "updates": callback.updates, "update_ms": 1e3 * learn_s / callback.updates,
            "eval_mean": held_out, "reached": callback.confirmed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is SB3's fastest on a small MLP here)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(json.dumps({"seed": args.seed, **sb3_run(args.seed)}))


if __name__ == "__main__":
    main()
