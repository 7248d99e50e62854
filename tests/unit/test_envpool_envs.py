"""EnvPool's training envs against gymnasium's, stepped the same way (``step_envs``).

EnvPool seeds its envs with its own generator, so the two backends never start an episode in
the same state from the same seed. Where the dynamics are deterministic (CartPole, MuJoCo), the
gymnasium env is put into EnvPool's start state and both are stepped with the same actions:
observations, shaped rewards and episode ends must agree. Atari's emulator differs in a few
pixels (EnvPool bundles its own ALE build), so its frames are compared as a fraction of pixels,
with the random parts (reset no-ops, sticky actions) switched off on both sides.
"""

from __future__ import annotations

import ale_py
import envpool
import gymnasium as gym
import numpy as np
import pytest

from faasrl.env_code import EnvCode
from faasrl.rl.env_backends import (
    ATARI_MISSING,
    ATARI_PREFIX,
    ATARI_SUFFIX,
    ENVPOOL_SAME_IDS,
    envpool_id,
    resolve,
)
from faasrl.rl.envpool_envs import RewardNormalizer, make_pool
from faasrl.rl.envs import ATARI_WRAPPERS, make_vec_env, step_envs

gym.register_envs(ale_py)


def test_backend_table_names_envs_envpool_has():
    listed = set(envpool.list_all_envs())
    atari = [i for i in gym.registry if i.startswith(ATARI_PREFIX) and i.endswith(ATARI_SUFFIX)]
    assert len(atari) > 100
    for env_id in [*ENVPOOL_SAME_IDS, *atari]:
        pool_id = envpool_id(env_id)
        game = env_id.removeprefix(ATARI_PREFIX).removesuffix(ATARI_SUFFIX)
        assert (pool_id is None) == (game in ATARI_MISSING), env_id
        assert pool_id is None or pool_id in listed, env_id


def test_backend_defaults_and_refusals():
    assert resolve("Hopper-v5", None, None) == "envpool"
    assert resolve("ALE/Pong-v5", None, None) == "gymnasium"  # EnvPool runs it when asked
    assert resolve("CartPole-v1", None, None) == "gymnasium"
    assert resolve("ALE/Pong-v5", None, "envpool") == "envpool"
    assert resolve("Pendulum-v1", None, None) == "gymnasium"
    assert resolve("Hopper-v5", None, "gymnasium") == "gymnasium"
    code = EnvCode(entry_point="my_env:Env")
    assert resolve("CartPole-v1", code, None) == "gymnasium"  # code is always gymnasium's
    for env_id, env in [("Pendulum-v1", None), ("Hopper-v4", None), ("CartPole-v1", code)]:
        with pytest.raises(ValueError, match="envpool cannot run"):
            resolve(env_id, env, "envpool")


def _gym_in_pool_state(env_id: str, obs: np.ndarray, info: dict) -> gym.vector.VectorEnv:
    """Gymnasium's training env, put into the state EnvPool's env 0 observes."""
    envs = make_vec_env(env_id, 1, 0)
    base = envs.envs[0].unwrapped
    if env_id == "CartPole-v1":
        base.state = obs[0].astype(np.float64)
    else:  # MuJoCo v5: qpos less x (reported in info), then qvel (unclipped at reset)
        nq = base.model.nq
        base.set_state(np.concatenate([info["x_position"][:1], obs[0, :nq - 1]]),
                       obs[0, nq - 1:])
    return envs


@pytest.mark.parametrize("env_id", sorted(ENVPOOL_SAME_IDS))
def test_dynamics_and_shaped_rewards_match_gymnasium(env_id):
    pool = make_vec_env(env_id, 1, 3, backend="envpool")
    obs, info = pool.pool.reset()
    envs = _gym_in_pool_state(env_id, obs, info)
    rng = np.random.default_rng(0)
    space = pool.single_action_space
    r_pool, r_gym = np.empty(1, np.float32), np.empty(1, np.float32)
    ended_at = None
    try:
        for t in range(60):
            if isinstance(space, gym.spaces.Box):
                action = rng.uniform(-1.5, 1.5, (1, *space.shape))  # clipped on both sides
            else:
                action = np.array([int(obs[0, 2] > 0)])  # balances: a long episode
            obs, term, trunc, ended = step_envs(pool, action, r_pool)
            g_obs, g_term, g_trunc, g_ended = step_envs(envs, action, r_gym)
            assert term[0] == g_term[0] and trunc[0] == g_trunc[0], t
            np.testing.assert_allclose(r_pool, r_gym, rtol=1e-4, atol=1e-5)
            if ended:  # the final observation, then each backend's own reset
                np.testing.assert_allclose(ended[0][1], g_ended[0][1], rtol=1e-4, atol=1e-4)
                assert ended[0][2]["episode"]["l"] == g_ended[0][2]["episode"]["l"] == t + 1
                ended_at = t
                break
            np.testing.assert_allclose(obs, g_obs, rtol=1e-4, atol=1e-4)
    finally:
        pool.close()
        envs.close()
    assert ended_at is not None or env_id != "Hopper-v5"  # its end compared too


def test_reward_normalizer_is_gymnasium_per_env():
    rewards = np.random.default_rng(1).normal(size=(200, 2))
    terminated = np.zeros((200, 2), bool)
    terminated[50, 0] = terminated[120, 1] = True
    ours = RewardNormalizer(2, gamma=0.9)
    wrappers = [gym.wrappers.utils.RunningMeanStd(shape=()) for _ in range(2)]
    discounted = np.zeros(2)
    for t in range(200):
        got = ours(rewards[t], terminated[t])
        for i, rms in enumerate(wrappers):  # NormalizeReward.step's arithmetic, per env
            discounted[i] = discounted[i] * 0.9 * (1 - terminated[t, i]) + rewards[t, i]
            rms.update(np.array([discounted[i]]))
            want = np.clip(rewards[t, i] / np.sqrt(rms.var + 1e-8), -10, 10)
            assert got[i] == pytest.approx(want, rel=1e-9)


def test_same_seed_same_rollout_other_seed_other():
    def trajectory(seed: int) -> np.ndarray:
        pool = make_vec_env("Hopper-v5", 2, seed, backend="envpool")
        rng, rewards, out = np.random.default_rng(0), np.empty(2, np.float32), []
        obs, _ = pool.reset()
        for _ in range(100):
            obs, *_ = step_envs(pool, rng.uniform(-1, 1, (2, 3)), rewards)
            out.append(obs.copy())
        pool.close()
        return np.stack(out)

    first = trajectory(5)
    assert np.array_equal(first, trajectory(5))
    assert not np.allclose(first, trajectory(6))


def test_atari_spaces_and_episode_options_match_gymnasium():
    gym_envs = make_vec_env("ALE/Pong-v5", 2, 0)
    pool = make_vec_env("ALE/Pong-v5", 2, 0, backend="envpool")
    try:
        assert pool.single_observation_space == gym_envs.single_observation_space
        assert pool.single_action_space == gym_envs.single_action_space
        obs, _ = pool.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        config = pool.pool.config
        pre = dict(ATARI_WRAPPERS)["AtariPreprocessing"]
        assert (config["noop_max"], config["frame_skip"], config["episodic_life"]) == \
            (pre["noop_max"], pre["frame_skip"], pre["terminal_on_life_loss"])
        assert config["repeat_action_probability"] == 0.25  # ALE v5's sticky actions
        assert not config["use_fire_reset"] and not config["reward_clip"]
        rewards = np.empty(2, np.float32)
        for _ in range(200):  # Pong scores within 200 steps: a point is +-1, raw and shaped
            step_envs(pool, np.array([0, 0]), rewards)
            assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
    finally:
        pool.close()
        gym_envs.close()


def test_atari_frames_match_gymnasium_preprocessing():
    """No no-ops (EnvPool's noop_max 1 draws none; 0 crashes it), no sticky actions: the frames
    differ only where the two ALE builds render a few pixels apart."""
    pool = make_pool("ALE/Pong-v5", 1, 0, noop_max=1, repeat_action_probability=0.0)
    pre = dict(ATARI_WRAPPERS)["AtariPreprocessing"] | {"noop_max": 0}
    env = gym.wrappers.FrameStackObservation(gym.wrappers.AtariPreprocessing(
        gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0), **pre),
        dict(ATARI_WRAPPERS)["FrameStackObservation"]["stack_size"])
    try:
        obs, _ = pool.reset()
        g_obs, _ = env.reset(seed=0)
        actions = np.random.default_rng(0).integers(0, 6, 40)
        for action in actions:
            assert np.mean(obs[0] != g_obs) < 0.01
            obs, *_ = pool.step(np.array([action]))
            g_obs, *_ = env.step(int(action))
        # A mismatched stack order or resize would differ in far more than 1 % of pixels.
        assert np.mean(obs[0][::-1] != g_obs) > 0.01
    finally:
        pool.close()
        env.close()
