"""Which library steps a job's training envs: EnvPool's C++ batched envs, or gymnasium's.

Pure data, no EnvPool import: the gateway decides a job's backend at submit with it, and its
image has no EnvPool. EnvPool runs an env only where its options reproduce the platform's
gymnasium preprocessing (:mod:`faasrl.rl.envs`); ``docs/env-backends.md`` lists what still
differs. An env brought as code is always gymnasium's.
"""

from __future__ import annotations

from typing import Literal

from faasrl.env_code import EnvCode

EnvBackend = Literal["envpool", "gymnasium"]
BACKENDS: tuple[EnvBackend, ...] = ("envpool", "gymnasium")

# Gymnasium ids EnvPool runs under the same name with the same semantics.
ENVPOOL_SAME_IDS = frozenset({"CartPole-v1", "Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"})
ATARI_PREFIX, ATARI_SUFFIX = "ALE/", "-v5"
# ALE's v5 games that EnvPool lacks or names otherwise (its ``TicTacToe3d``).
ATARI_MISSING = frozenset({"TicTacToe3D"})
# Where a job that names no backend gets EnvPool: where it measurably speeds an actor up
# (MuJoCo's rollout 1.8x; Pong's gained nothing on one core: bench/rollout_throughput.py).
# CartPole and Atari stay on gymnasium unless asked: their end-to-end figures (the main job,
# the comparisons with SB3 and RLlib) were measured there, and EnvPool's random streams give
# the main job a different run (seed 1 stopped at round 43 with a held-out 463 < 475).
ENVPOOL_BY_DEFAULT = frozenset({"Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"})


def envpool_id(env_id: str, env: EnvCode | None = None) -> str | None:
    """EnvPool's id for ``env_id`` where it gives the platform's semantics; None elsewhere."""
    if env is not None:
        return None
    if env_id in ENVPOOL_SAME_IDS:
        return env_id
    if env_id.startswith(ATARI_PREFIX) and env_id.endswith(ATARI_SUFFIX):
        game = env_id[len(ATARI_PREFIX):]
        if game.removesuffix(ATARI_SUFFIX) not in ATARI_MISSING:
            return game
    return None


def resolve(env_id: str, env: EnvCode | None, requested: EnvBackend | None) -> EnvBackend:
    """The backend a job runs: ``requested``, or (None) EnvPool for ``ENVPOOL_BY_DEFAULT``'s
    envs. A ValueError where EnvPool is asked for an env it cannot run."""
    supported = envpool_id(env_id, env) is not None
    if requested is None:
        return "envpool" if supported and env_id in ENVPOOL_BY_DEFAULT else "gymnasium"
    if requested == "envpool" and not supported:
        what = "an env brought as code" if env is not None else repr(env_id)
        raise ValueError(f"envpool cannot run {what} with the platform's semantics; "
                         f"it runs {', '.join(sorted(ENVPOOL_SAME_IDS))} and Atari's "
                         f"{ATARI_PREFIX}<game>{ATARI_SUFFIX}; use gymnasium")
    return requested
