"""The replay memory: sampling frequencies follow p^α, importance weights, the ring, and
priority updates that arrive after their slot was overwritten."""

from __future__ import annotations

import numpy as np
import pytest

from faasrl.rl.replay import ReplayMemory, SumTree

CHI2_DF7_P001 = 24.32  # the chi-square critical value for 7 degrees of freedom at p = 0.001


def _batch(values: list[int]) -> dict[str, np.ndarray]:
    return {"obs": np.array(values, dtype=np.uint8)[:, None].repeat(4, axis=1),
            "reward": np.array(values, dtype=np.float32)}


def test_sum_tree_finds_the_leaf_each_prefix_falls_in():
    tree = SumTree(5)  # padded to 8 leaves
    tree.set(np.arange(5), np.array([1.0, 0.0, 2.0, 3.0, 4.0]))
    assert tree.total == 10.0
    found = tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99, 6.0, 9.99]))
    assert found.tolist() == [0, 0, 2, 2, 3, 3, 4, 4]  # never the empty leaf 1
    tree.set(np.array([4]), np.array([0.5]))
    assert tree.total == 6.5


def test_sampling_frequencies_follow_p_to_the_alpha():
    memory = ReplayMemory(8, alpha=0.6, epsilon=0.0)
    td = np.arange(1, 9, dtype=np.float64)
    memory.add(_batch(list(range(8))), priorities=td)
    rng = np.random.default_rng(1)
    counts = np.zeros(8)
    draws = 40_000
    for _ in range(draws // 64):
        counts += np.bincount(memory.sample(64, beta=0.4, rng=rng).slots, minlength=8)
    expected = td ** 0.6 / (td ** 0.6).sum() * counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_DF7_P001, (counts, expected)
    uniform = ReplayMemory(8, alpha=0.0)  # α = 0: every slot alike, whatever its priority
    uniform.add(_batch(list(range(8))), priorities=td)
    assert np.allclose(uniform.sample(8, beta=1.0, rng=rng).weights, 1.0)


def test_importance_weights_are_normalised_by_the_batchs_rarest_transition():
    memory = ReplayMemory(5, alpha=1.0, epsilon=0.0)
    # One transition with a near-zero priority: normalised by the memory's rarest, every
    # weight would shrink ~1000-fold and with it the learning rate.
    memory.add(_batch([0, 1, 2, 3, 4]), priorities=np.array([1.0, 2.0, 3.0, 4.0, 0.01]))
    sample = memory.sample(4, beta=0.5, rng=np.random.default_rng(0))
    probs = np.array([1.0, 2.0, 3.0, 4.0, 0.01])[sample.slots] / 10.01
    want = (5 * probs) ** -0.5 / (5 * probs.min()) ** -0.5  # the batch's rarest weighs 1
    assert np.allclose(sample.weights, want) and sample.weights.max() == pytest.approx(1.0)
    assert sample.arrays["reward"].tolist() == sample.slots.astype(np.float32).tolist()


def test_the_ring_overwrites_the_oldest_and_new_transitions_get_the_top_priority():
    memory = ReplayMemory(4, alpha=1.0, epsilon=0.0)
    memory.add(_batch([0, 1, 2]), priorities=np.array([5.0, 1.0, 1.0]))
    slots = memory.add(_batch([3, 4, 5]))  # slot 3, then slots 0 and 1 again
    assert slots.tolist() == [3, 0, 1] and len(memory) == 4
    assert memory.arrays["reward"].tolist() == [4.0, 5.0, 2.0, 3.0]
    assert memory.tree.leaves(4).tolist() == [5.0, 5.0, 1.0, 5.0]  # max seen, 5
    assert memory.arrays["obs"].dtype == np.uint8 and memory.bytes_per_transition == 4 + 4
    with pytest.raises(ValueError, match="keys"):
        memory.add({"obs": np.zeros((1, 4), np.uint8)})


def test_a_priority_update_for_an_overwritten_slot_is_dropped():
    memory = ReplayMemory(2, alpha=1.0, epsilon=0.0)
    memory.add(_batch([0, 1]), priorities=np.array([1.0, 1.0]))
    sample = memory.sample(2, beta=1.0, rng=np.random.default_rng(0))
    memory.add(_batch([2]), priorities=np.array([3.0]))  # slot 0 now holds transition 2
    applied = memory.update_priorities(sample.slots, sample.generations,
                                       np.full(len(sample.slots), 9.0))
    assert applied == int((sample.slots == 1).sum()) and applied >= 1
    assert memory.tree.leaves(2).tolist() == [3.0, 9.0]  # transition 2 kept its own priority


FRAME = (12, 12)


def _atari_like(rng: np.random.Generator, steps: int, stack: int = 4, n: int = 3,
                episode: int = 40) -> dict[str, np.ndarray]:
    """n-step transitions of one env with stacked frames, as an actor ships them: each new
    frame appears in ``stack`` observations and in obs and next_obs; an episode starts from a
    stack of copies of its first frame."""
    frames, obs = [], []
    for t in range(steps + n):
        if t % episode == 0:
            start = rng.integers(0, 256, FRAME, dtype=np.uint8)
            frames = [start] * stack
        else:
            frames = [*frames[1:], rng.integers(0, 256, FRAME, dtype=np.uint8)]
        obs.append(np.stack(frames))
    stacks = np.stack(obs)
    return {"obs": stacks[:steps], "next_obs": stacks[n:n + steps],
            "returns": np.arange(steps, dtype=np.float32)}


def test_stacked_frames_are_stored_once_and_sampled_back_whole():
    rng = np.random.default_rng(0)
    batch = _atari_like(rng, 200)
    memory = ReplayMemory(256, alpha=0.0)
    memory.add(batch)
    # One new frame a step (an episode's first: its reset frame) for 200 steps + 3 ahead.
    assert len(memory.frames) == 200 + 3
    frame, ids = 12 * 12, 2 * 4 * 4
    assert memory.bytes_per_transition <= int(frame * 203 / 200) + ids + 4  # not 8 frames
    drawn = memory.sample(64, beta=1.0, rng=rng)
    index = drawn.arrays["returns"].astype(int)
    np.testing.assert_array_equal(drawn.arrays["obs"], batch["obs"][index])
    np.testing.assert_array_equal(drawn.arrays["next_obs"], batch["next_obs"][index])


def test_frames_no_slot_names_any_more_are_freed_as_the_ring_turns():
    rng = np.random.default_rng(1)
    memory = ReplayMemory(64, alpha=0.0)
    for _ in range(20):  # 10x the capacity
        memory.add(_atari_like(rng, 32))
    # Live frames: about one per transition held, never the 20 batches' worth.
    assert len(memory.frames) <= 64 + 2 * (4 + 3)
    assert memory.frames.high <= 2 * (64 + 2 * (4 + 3))  # freed ids are reused
    # Every live frame is named exactly as often as the slots name it.
    named = np.bincount(np.concatenate([memory.arrays[k].ravel() for k in memory.framed]),
                        minlength=len(memory.frames.refs))
    np.testing.assert_array_equal(named, memory.frames.refs)


def test_a_snapshot_of_framed_memory_restores_the_same_transitions_and_keeps_going():
    rng = np.random.default_rng(2)
    memory = ReplayMemory(64, alpha=0.6)
    for _ in range(3):
        memory.add(_atari_like(rng, 40), priorities=rng.random(40))
    restored = ReplayMemory(64, alpha=0.6)
    restored.load(memory.state())
    a = memory.sample(32, beta=0.5, rng=np.random.default_rng(3))
    b = restored.sample(32, beta=0.5, rng=np.random.default_rng(3))
    for key in ("obs", "next_obs", "returns"):
        np.testing.assert_array_equal(a.arrays[key], b.arrays[key])
    batch = _atari_like(rng, 40)
    memory.add(batch)
    restored.add(batch)  # its free ids and digests work after the load
    assert len(restored.frames) == len(memory.frames)
    assert restored.bytes_per_transition == memory.bytes_per_transition
    np.testing.assert_array_equal(restored.sample(8, 1.0, np.random.default_rng(4)).arrays["obs"],
                                  memory.sample(8, 1.0, np.random.default_rng(4)).arrays["obs"])


def test_every_sum_in_the_tree_is_its_childrens_after_scattered_and_repeated_sets():
    """Sets of random slots, repeats included (the last value wins): each inner node holds
    exactly the sum of its two children, the root the sum of the leaves."""
    tree, rng = SumTree(1_000), np.random.default_rng(0)
    want = np.zeros(tree.size)
    for _ in range(50):
        index = rng.integers(0, 1_000, 300)
        values = rng.random(300)
        tree.set(index, values)
        want[index] = values
    assert np.array_equal(tree.leaves(tree.size), want)
    inner = np.arange(1, tree.size)
    assert np.array_equal(tree.nodes[inner], tree.nodes[2 * inner] + tree.nodes[2 * inner + 1])
    assert tree.total == pytest.approx(want.sum())
