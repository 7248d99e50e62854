"""Every env seed a job uses, defined once, so that training, target confirmations and the final
evaluation never share an episode's seed and a job's figures are reproducible under its seed.

- Training: an actor slot's envs, first built in round ``round``, are seeded from
  :func:`training_seed` (a vector env seeds its env ``i`` with ``seed + i``); later episodes
  continue those streams. For every job seed the spec allows (below 2**31) these stay below
  ``EVALUATION_BASE``.
- Evaluations: episode ``i`` of an evaluation resets its env with ``seeds[i]`` of
  :func:`evaluation_seeds`, a block of ``EVALUATION_BLOCK`` seeds above ``EVALUATION_BASE`` per
  (job seed, purpose). Confirmation attempts all reuse the ``confirmation`` block: successive
  versions are compared on the same episodes, and the stop decision, however often it is
  retried, never sees the ``final`` block, the held-out one the job reports.
- Updates: a synchronous round's update draws its minibatches, and the Hessian probe its random
  vectors, from :func:`update_seed` (the learner's, not an env's).
"""

from __future__ import annotations

from typing import Literal

TRAINING_JOB_STRIDE = 1_000_003
TRAINING_SLOT_STRIDE = 10_007
UPDATE_JOB_STRIDE = 7919
EVALUATION_BASE = 2**52  # above every training seed; the top evaluation seed stays below 2**53
EVALUATION_BLOCK = 2**20  # seeds per (job seed, purpose): more than a job's evaluation episodes
Purpose = Literal["confirmation", "final"]
PURPOSES: tuple[Purpose, ...] = ("confirmation", "final")


def training_seed(job_seed: int, slot: int, round_: int) -> int:
    """The first env seed of an actor slot whose envs are built in round ``round_``."""
    return job_seed * TRAINING_JOB_STRIDE + slot * TRAINING_SLOT_STRIDE + round_


def update_seed(job_seed: int, round_: int) -> int:
    """The seed of round ``round_``'s update (its torch generators): the same on a retry."""
    return job_seed * UPDATE_JOB_STRIDE + round_


def evaluation_seeds(job_seed: int, purpose: Purpose, episodes: int) -> range:
    """One seed per episode of a ``purpose`` evaluation: the same ones on every call."""
    if not 0 <= episodes <= EVALUATION_BLOCK:
        raise ValueError(f"{episodes} evaluation episodes: a purpose has {EVALUATION_BLOCK} "
                         "seeds")
    block = job_seed * len(PURPOSES) + PURPOSES.index(purpose)
    first = EVALUATION_BASE + block * EVALUATION_BLOCK
    return range(first, first + episodes)
