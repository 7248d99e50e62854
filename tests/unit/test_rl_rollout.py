"""Rollouts and evaluation on real gymnasium envs (plus two tiny registered ones), and the
batches PPO and IMPACT actors make of the steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from faasrl.algorithms import impact, ppo
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for
from faasrl.rl.rollout import Rollout, evaluate


class _Corridor(gym.Env):
    """Reward 1 per step; terminates after ``length`` steps when ``length`` is set."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int | None = None):
        self.length, self.t = length, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.length is not None and self.t >= self.length
        return np.full(2, self.t / 10, np.float32), 1.0, done, False, {}


gym.register("faasrl-test/Truncated-v0", entry_point=_Corridor, max_episode_steps=5)
gym.register("faasrl-test/Terminated-v0", entry_point=_Corridor, kwargs={"length": 5})
CORRIDOR = PolicySpec(obs_shape=(2,), obs_dtype="float32", action_kind="discrete", action_dim=2)


def _constant_critic(value: float) -> ActorCritic:
    model = ActorCritic(CORRIDOR)
    last = model.critic[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(value)
    return model


def _rollout(env_id: str, model: ActorCritic, *, steps: int, seed: int = 0,
             num_envs: int = 2) -> Rollout:
    envs = make_vec_env(env_id, num_envs, seed)
    return Rollout(envs, model, num_steps=steps, gamma=0.5, seed=seed)


PPO = ppo.Config(gamma=0.5, gae_lambda=1.0)


def _ppo_batch(rollout: Rollout) -> tuple[dict[str, np.ndarray], list[tuple[float, int]]]:
    steps, episodes = rollout.collect()
    return ppo.actor_batch(steps, PPO), episodes


def test_truncated_episodes_bootstrap_from_the_final_observation():
    batch, episodes = _ppo_batch(_rollout("faasrl-test/Truncated-v0", _constant_critic(4.0),
                                          steps=5))
    returns = batch["returns"].reshape(5, 2)
    # Step 5 is cut by the time limit: its return is 1 + gamma * V(final_obs) = 1 + 0.5 * 4.
    np.testing.assert_allclose(returns[-1], [3.0, 3.0])
    np.testing.assert_allclose(returns[0], [1 + 0.5 * (1 + 0.5 * (1 + 0.5 * (1 + 0.5 * 3)))] * 2)
    assert episodes == [(5.0, 5), (5.0, 5)]  # raw returns: no bootstrap in the statistics


def test_terminated_episodes_do_not_bootstrap():
    batch, _ = _ppo_batch(_rollout("faasrl-test/Terminated-v0", _constant_critic(4.0), steps=5))
    np.testing.assert_allclose(batch["returns"].reshape(5, 2)[-1], [1.0, 1.0])


def test_episodes_continue_across_collects():
    rollout = _rollout("faasrl-test/Terminated-v0", _constant_critic(0.0), steps=3)
    assert rollout.collect()[1] == []
    _, episodes = rollout.collect()  # steps 4..6: the episodes end at step 5
    assert episodes == [(5.0, 5), (5.0, 5)]



def finished_episodes(infos: dict) -> list[tuple[float, int]]:
    """(raw return, length) of the episodes SyncVectorEnv says ended on this step."""
    final = infos.get("final_info", {})
    if "episode" not in final:
        return []
    mask = final["_episode"]
    returns, lengths = final["episode"]["r"][mask], final["episode"]["l"][mask]
    return [(float(r), int(n)) for r, n in zip(returns, lengths, strict=True)]

def test_the_rollouts_own_stepping_is_the_vector_envs_same_step_autoreset():
    """A rollout steps the vector env's envs itself: on the same actions, SyncVectorEnv gives
    the same observations, rewards, episode ends and finished episodes."""
    torch.manual_seed(0)
    rollout = _rollout("CartPole-v1", ActorCritic(policy_spec_for("CartPole-v1")), steps=200,
                       seed=3, num_envs=3)
    steps, episodes = rollout.collect()
    reference = make_vec_env("CartPole-v1", 3, 3)
    obs, _ = reference.reset()  # as Rollout does: the seeded streams go on
    seen = []
    for t in range(200):  # CartPole's time limit (500) cuts nothing here: no bootstrap
        np.testing.assert_array_equal(steps.obs[t], obs)
        obs, rewards, terminated, truncated, infos = reference.step(steps.actions[t])
        np.testing.assert_array_equal(steps.rewards[t], rewards.astype(np.float32))
        np.testing.assert_array_equal(steps.ends[t], terminated | truncated)
        seen += finished_episodes(infos)
    np.testing.assert_array_equal(steps.next_obs, obs)
    assert episodes == seen and len(episodes) >= 10


def test_batch_shapes_and_dtypes_follow_the_spec():
    spec = policy_spec_for("CartPole-v1")
    batch, _ = _ppo_batch(_rollout("CartPole-v1", ActorCritic(spec), steps=16, num_envs=3))
    assert batch["obs"].shape == (48, 4) and batch["obs"].dtype == np.float32
    assert batch["actions"].shape == (48,) and batch["actions"].dtype == np.int64
    for key in ("logprobs", "values", "advantages", "returns"):
        assert batch[key].shape == (48,) and batch[key].dtype == np.float32
    assert ppo.batch_schema(spec, 3).problem(batch) is None


def test_impact_batches_carry_rewards_ends_and_the_last_observation():
    spec = policy_spec_for("CartPole-v1")
    rollout = _rollout("CartPole-v1", ActorCritic(spec), steps=40, num_envs=3)
    steps, _ = rollout.collect()
    batch = impact.actor_batch(steps, impact.Config())
    assert batch["rewards"].shape == batch["ends"].shape == (120,)
    assert set(np.unique(batch["ends"])) <= {0.0, 1.0} and batch["ends"].sum() >= 1
    np.testing.assert_array_equal(batch["last_obs"], rollout.collect()[0].obs[0])
    schema = impact.batch_schema(spec, 3)
    assert schema.problem(batch) is None
    assert "env rows" in schema.problem({**batch, "last_obs": batch["last_obs"][:2]})
    assert "unexpected" in ppo.batch_schema(spec, 3).problem(batch)


def test_continuous_actions_and_float64_envs_are_cast():
    spec = policy_spec_for("Pendulum-v1")
    batch, _ = _ppo_batch(_rollout("Pendulum-v1", ActorCritic(spec), steps=4))
    assert batch["obs"].dtype == np.float32 and batch["actions"].shape == (8, 1)


def test_atari_batches_are_stacked_uint8_frames():
    spec = policy_spec_for("ALE/Pong-v5")
    batch, _ = _ppo_batch(_rollout("ALE/Pong-v5", ActorCritic(spec), steps=2, num_envs=1))
    assert batch["obs"].shape == (2, 4, 84, 84) and batch["obs"].dtype == np.uint8


def test_rollouts_are_deterministic_under_a_seed():
    spec = policy_spec_for("CartPole-v1")
    torch.manual_seed(0)
    model = ActorCritic(spec)
    first, _ = _ppo_batch(_rollout("CartPole-v1", model, steps=64, seed=7))
    second, _ = _ppo_batch(_rollout("CartPole-v1", model, steps=64, seed=7))
    other, _ = _ppo_batch(_rollout("CartPole-v1", model, steps=64, seed=8))
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    assert not np.array_equal(first["obs"], other["obs"])


def test_evaluate_plays_whole_episodes_with_raw_returns():
    returns = evaluate(_constant_critic(0.0), "faasrl-test/Truncated-v0", episodes=3, seed=0)
    assert returns == [5.0, 5.0, 5.0]
    spec = policy_spec_for("CartPole-v1")
    torch.manual_seed(0)
    model = ActorCritic(spec)
    assert evaluate(model, "CartPole-v1", episodes=2, seed=1) == \
        evaluate(model, "CartPole-v1", episodes=2, seed=1)


def test_each_evaluation_episode_is_played_on_its_own_seed():
    """Episode i runs on seed + i, whatever came before it: a seed range names its episodes."""
    torch.manual_seed(1)  # a policy whose episodes differ from seed to seed
    model = ActorCritic(policy_spec_for("CartPole-v1"))
    three = evaluate(model, "CartPole-v1", episodes=3, seed=10)
    assert len(set(three)) == 3
    assert evaluate(model, "CartPole-v1", episodes=2, seed=11) == three[1:]
    assert evaluate(model, "CartPole-v1", episodes=1, seed=12) == three[2:]


def test_unknown_env_id_is_refused_before_building():
    with pytest.raises(ValueError, match="unknown gymnasium environment id"):
        make_vec_env("NoSuchEnv-v0", 1, 0)
