"""RLlib's PPO on a MuJoCo task by ``peer_runs.py``'s rule: the third side of
``mujoco_peers.py --rllib``. It runs in its own virtual environment (``make rllib-env``: RLlib
2.60 pins gymnasium 1.2.2, the platform's is 1.4.0; Hopper-v5 and HalfCheetah-v5 step alike
in both), imports no platform beyond the evaluation seeds, and prints one JSON line with what
``peer_runs.sb3_run`` reports.

The zoo entry in RLlib's words (its new API stack): 2 env runners of one env, 256 steps each
(the entry's 512 a train batch; RLlib samples them in parallel, as faasrl's two actors do),
minibatches of the entry's size, its epochs, lr, gamma, lambda, clip, entropy and value
coefficients and global-norm clipping; no KL penalty and no value clipping (SB3 has neither);
ReLU [256, 256] policy and value nets, a state-independent log-std set to the entry's initial
-2 before the first update. Observations are normalized by RLlib's ``MeanStdFilter``
(clipped at 10, as ``VecNormalize``); rewards by gymnasium's ``NormalizeReward`` in each env
runner's env, clipped at 10 (RLlib has no reward normalizer; each runner keeps its own
statistics, where ``VecNormalize`` keeps one). The stopping rule reads raw returns, recorded
before that normalization.

    .venv-rllib/bin/python bench/rllib_ppo.py '{"env_id": "HalfCheetah-v5", "seed": 1, ...}'

(``mujoco_peers.py --rllib`` writes that JSON from the task it runs.)
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from library_eval import evaluate_greedy
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.connectors.env_to_module import MeanStdFilter
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.tune.registry import register_env

RAW_RETURN = "raw_episode_return"
OBS_CLIP = REWARD_CLIP = 10.0
ENV_RUNNERS = 2


def make_env(config: dict[str, Any]) -> gym.Env:
    """The task's env, its raw episode returns recorded before rewards are normalized."""
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(config["env_id"]))
    env = gym.wrappers.NormalizeReward(env, gamma=config["gamma"])
    return gym.wrappers.ClipReward(env, -REWARD_CLIP, REWARD_CLIP)


class RawReturns(RLlibCallback):
    """Reports every ended episode's raw return to the driver."""

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any
                       ) -> None:
        info = episode.get_infos(-1)
        metrics_logger.log_value(RAW_RETURN, float(info["episode"]["r"]),
                                 reduce="item_series")


def build(run: dict[str, Any]) -> Algorithm:
    zoo = run["zoo"]
    register_env("zoo-env", make_env)
    config = (
        PPOConfig()
        .environment("zoo-env", env_config={"env_id": run["env_id"], "gamma": zoo["gamma"]})
        .env_runners(num_env_runners=ENV_RUNNERS, num_envs_per_env_runner=1,
                     rollout_fragment_length=zoo["n_steps"] // ENV_RUNNERS,
                     env_to_module_connector=lambda env, spaces, device: MeanStdFilter(
                         clip_by_value=OBS_CLIP))
        .training(train_batch_size_per_learner=zoo["n_steps"], minibatch_size=zoo["batch_size"],
                  num_epochs=zoo["n_epochs"], lr=zoo["learning_rate"], gamma=zoo["gamma"],
                  lambda_=zoo["gae_lambda"], clip_param=zoo["clip_range"],
                  entropy_coeff=zoo["ent_coef"], vf_loss_coeff=zoo["vf_coef"],
                  grad_clip=zoo["max_grad_norm"], grad_clip_by="global_norm",
                  use_kl_loss=False, vf_clip_param=float("inf"))
        .rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=run["hidden"], fcnet_activation=run["activation"],
            vf_share_layers=False, free_log_std=True))
        .callbacks(RawReturns)
        .debugging(seed=run["seed"], log_level="ERROR")
    )
    algo = config.build_algo()

    def start_log_std(learner: Any) -> None:
        with torch.no_grad():
            learner.module[DEFAULT_MODULE_ID].pi.log_std.fill_(run["log_std_init"])

    algo.learner_group.foreach_learner(start_log_std)
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group)
    return algo


class Greedy:
    """The trained module acting as RLlib's env runners act without exploring: observations
    through a copy of the runners' merged filter, the Gaussian's mean squashed back into the
    action bounds (RLlib's ``normalize_actions``), as ``predict``."""

    def __init__(self, algo: Algorithm, env_id: str):
        self.module = algo.get_module()
        connectors = algo.env_runner_group.local_env_runner._env_to_module.connectors
        stats = next(c for c in connectors if isinstance(c, MeanStdFilter))
        self.filter = copy.deepcopy(stats._filters[None])  # the one agent's
        space = gym.make(env_id).action_space
        self.low, self.high = space.low, space.high

    def predict(self, obs: np.ndarray, deterministic: bool) -> tuple[np.ndarray, None]:
        x = torch.as_tensor(self.filter(obs, update=False), dtype=torch.float32)
        with torch.no_grad():
            inputs = self.module.forward_inference({"obs": x})["action_dist_inputs"].numpy()
        mean = np.clip(inputs[:, : inputs.shape[1] // 2], -1.0, 1.0)
        return self.low + (mean + 1.0) * (self.high - self.low) / 2.0, None


def train(run: dict[str, Any]) -> dict[str, Any]:
    """Train until the rule stops it; ``run`` is ``mujoco_peers.py``'s spec of the run."""
    env_id, seed, target, window_size = run["env_id"], run["seed"], run["target"], run["window"]

    def greedy_mean(purpose: str) -> float:
        return evaluate_greedy(Greedy(algo, env_id), env_id, seed, purpose, run["episodes"])

    algo = build(run)
    window: deque[float] = deque(maxlen=window_size)
    env_steps = updates = checks = next_confirm = 0
    reached = False
    t0 = time.perf_counter()
    while (env_steps < run["max_env_steps"] and not reached
           and time.perf_counter() - t0 < run["max_wall_s"]):
        result = algo.train()
        env_steps = int(result["num_env_steps_sampled_lifetime"])
        updates += 1
        ended = result["env_runners"].get(RAW_RETURN, [])
        window.extend([] if isinstance(ended, float) else ended)  # NaN: an iteration without one
        checks += 1  # once per train batch: SB3's check_every is the zoo's n_steps too
        if len(window) == window_size and np.mean(window) >= target and checks >= next_confirm:
            reached = greedy_mean("confirmation") >= target
            next_confirm = checks + run["confirm_gap"]
    held_out = greedy_mean("final")
    out = {"wall_s": time.perf_counter() - t0, "env_steps": env_steps, "updates": updates,
           "window_mean": float(np.mean(window)) if len(window) == window_size else None,
           "eval_mean": held_out, "reached": reached}
    algo.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=json.loads,
                        help="JSON: env_id, seed, target, window, episodes, confirm_gap, "
                             "max_env_steps, max_wall_s, the network (hidden, activation, "
                             "log_std_init) and zoo (the entry's PPO arguments in SB3's words)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ray.init(address="local", num_cpus=ENV_RUNNERS + 1, include_dashboard=False,
             log_to_driver=False)
    try:
        print(json.dumps(train(args.run)))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
