"""The authors' passes: how a round's batch is cut into slices, and the env columns a learner
trains a slice on."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from helpers import handler_module

from faasrl.data.trajectories import TrajectorySchema
from faasrl.workflow.stellaris import Part, cut


def _spans(plan: list[list[Part]]) -> list[list[tuple[int, int, int]]]:
    return [[(p.batch, p.start, p.stop) for p in s] for s in plan]


def test_the_authors_round_is_four_slices_of_whole_batches():
    assert _spans(cut(4, 4, 4)) == [[(b, 0, 4)] for b in range(4)]
    # Their demo: 16 workers of one env each, 4 learners: 4 workers' batches per slice.
    assert _spans(cut(16, 1, 4)) == [[(b, 0, 1) for b in range(i, i + 4)]
                                     for i in range(0, 16, 4)]


def test_null_slices_is_one_per_actor_batch_whatever_the_actors():
    assert _spans(cut(3, 4, None)) == [[(b, 0, 4)] for b in range(3)]
    assert _spans(cut(1, 8, None)) == [[(0, 0, 8)]]


def test_more_slices_than_batches_cut_batches_along_their_envs():
    assert _spans(cut(2, 2, 4)) == [[(0, 0, 1)], [(0, 1, 2)], [(1, 0, 1)], [(1, 1, 2)]]
    # Fewer env trajectories than slices: one slice per trajectory.
    assert _spans(cut(2, 1, 4)) == [[(0, 0, 1)], [(1, 0, 1)]]


@pytest.mark.parametrize(("batches", "envs", "slices"),
                         [(3, 4, 5), (4, 4, 1), (1, 4, 3), (5, 3, 4), (7, 2, 3), (4, 4, 16)])
def test_slices_cover_every_trajectory_once_contiguously_and_evenly(batches, envs, slices):
    plan = cut(batches, envs, slices)
    assert len(plan) == min(slices, batches * envs)
    units = [(p.batch, e) for s in plan for p in s for e in range(p.start, p.stop)]
    assert units == [(b, e) for b in range(batches) for e in range(envs)]
    sizes = Counter(len([1 for p in s for _ in range(p.start, p.stop)]) for s in plan)
    assert max(sizes) - min(sizes) <= 1
    # Slices become ready in order: each needs only batches up to its last one.
    last = [max(p.batch for p in s) for s in plan]
    assert last == sorted(last)


@pytest.fixture(scope="module")
def learner():
    return handler_module("learner", "learner_handler_passes")


def test_a_slice_trains_on_whole_env_trajectories(learner):
    steps, envs = 3, 4
    schema = TrajectorySchema({"obs": ("float32", (2,)), "rewards": ("float32", ())},
                              {"last_obs": ("float32", (2,))}, envs)
    # Time-major rows t·envs + e; an observation holds (t, e), a reward t·10 + e.
    obs = torch.tensor([[t, e] for t in range(steps) for e in range(envs)], dtype=torch.float32)
    batch = {"obs": obs, "rewards": obs[:, 0] * 10 + obs[:, 1],
             "last_obs": torch.tensor([[steps, e] for e in range(envs)], dtype=torch.float32)}
    part = learner._env_columns(batch, schema, envs, (1, 3))
    assert part["obs"].tolist() == [[t, e] for t in range(steps) for e in (1, 2)]
    assert part["rewards"].tolist() == [t * 10 + e for t in range(steps) for e in (1, 2)]
    assert part["last_obs"].tolist() == [[steps, 1], [steps, 2]]
    assert learner._env_columns(batch, schema, envs, None) is batch
    assert learner._env_columns(batch, schema, envs, (0, envs)) is batch
