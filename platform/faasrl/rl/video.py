"""Videos of a policy: whole episodes rendered to mp4 with imageio's ffmpeg writer (the
imageio-ffmpeg wheel ships its own ffmpeg binary, so nothing is downloaded at run time).

Each episode is bounded by ``MAX_FRAMES`` frames; an env that renders no RGB frames raises
:class:`NoVideo`, which says why, so a caller can report it instead of failing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from faasrl.env_code import EnvCode
from faasrl.rl.envs import make_env
from faasrl.rl.policy import PolicySpec

MAX_FRAMES = 1000  # per episode (CartPole's 500 steps fit); a longer episode's video stops here
DEFAULT_FPS = 30  # for an env whose metadata names no render_fps


class NoVideo(Exception):
    """The env cannot render RGB frames: the reason a job has no video."""


class Acting(Protocol):
    """What plays: faasrl's policies and off-policy models acting greedily."""

    spec: PolicySpec

    def act(self, obs: torch.Tensor, deterministic: bool, *,
            generator: torch.Generator | None = None) -> torch.Tensor: ...


@dataclass
class Video:
    frames: int
    width: int
    height: int
    fps: int
    episode_return: float


def _frame(env: Any) -> np.ndarray:
    try:
        frame = env.render()
    except Exception as exc:  # gymnasium's base render() raises NotImplementedError
        raise NoVideo(f"the env cannot render RGB frames: its render() raised "
                      f"{type(exc).__name__} {exc}".rstrip()) from None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise NoVideo("the env renders no RGB frames with render_mode='rgb_array'")
    return frame[:, :, :3]


@torch.no_grad()
def record_episode(policy: Acting, env_id: str, env: EnvCode | None, *, seed: int, path: Path,
                   progress: Callable[[int], None] | None = None) -> Video:
    """Play one episode (reset with ``seed``) with the policy's deterministic action and write
    its frames to ``path`` as H.264 mp4; ``progress`` hears the frame count as it grows."""
    import imageio.v2 as imageio  # only here: the writer starts ffmpeg

    try:
        played = make_env(env_id, env, render=True)
    except TypeError as exc:  # an env class that takes no render_mode
        raise NoVideo(f"the env cannot render: {exc}") from None
    spec = policy.spec
    try:
        obs, _ = played.reset(seed=seed)
        first = _frame(played)
        fps = int(played.metadata.get("render_fps") or DEFAULT_FPS)
        height, width = first.shape[:2]
        frames, total = 1, 0.0
        # macro_block_size 2: H.264's yuv420p wants even sides, and the size stays the env's
        with imageio.get_writer(path, format="FFMPEG", fps=fps, codec="libx264",
                                macro_block_size=2, ffmpeg_log_level="error") as writer:
            writer.append_data(first)
            while frames < MAX_FRAMES:
                x = torch.from_numpy(np.asarray(obs, dtype=spec.obs_dtype)[None])
                action = policy.act(x, True)[0]
                step = action.item() if spec.action_kind == "discrete" else action.numpy()
                obs, reward, terminated, truncated, _ = played.step(step)
                total += float(reward)
                writer.append_data(_frame(played))
                frames += 1
                if progress is not None:
                    progress(frames)
                if terminated or truncated:
                    break
    finally:
        played.close()
    return Video(frames=frames, width=width, height=height, fps=fps, episode_return=total)
