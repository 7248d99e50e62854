"""rl/video.py: one episode of a policy to mp4, bounded in frames, read back with imageio."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import pytest

from faasrl.algorithms import algorithm
from faasrl.jobs.spec import JobSpec
from faasrl.rl import video
from faasrl.rl.policy import policy_spec_for


def cartpole_policy():
    cfg = JobSpec.model_validate({"env_id": "CartPole-v1"}).hyperparameters
    return algorithm("ppo").make_model(policy_spec_for("CartPole-v1"), cfg).eval()


def test_an_episode_is_written_whole_at_the_envs_size(tmp_path: Path):
    path = tmp_path / "e.mp4"
    made = video.record_episode(cartpole_policy(), "CartPole-v1", None, seed=3, path=path)
    frames = list(iio.imiter(path))
    assert len(frames) == made.frames > 1  # the reset's frame, then one per step
    assert frames[0].shape == (made.height, made.width, 3) == (400, 600, 3)
    assert made.fps == 50  # CartPole's render_fps


def test_a_long_episode_stops_at_the_frame_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(video, "MAX_FRAMES", 5)
    seen: list[int] = []
    made = video.record_episode(cartpole_policy(), "CartPole-v1", None, seed=3,
                                path=tmp_path / "e.mp4", progress=seen.append)
    assert made.frames == 5 == len(list(iio.imiter(tmp_path / "e.mp4")))
    assert seen == [2, 3, 4, 5]
