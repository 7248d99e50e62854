"""The replay memory a buffer function holds: a FIFO ring of transitions under a sum tree.

Prioritized experience replay (Schaul et al.; the long-haul paper's buffer node): slot i is
drawn with P_i = p_i^α / Σ_k p_k^α, where p_i = |δ_i| + ε (the floor ε keeps every transition
drawable); α = 0 is uniform replay. Each batch ships importance weights
w_i = (N·P_i)^-β / max_j w_j, the max over the batch: weights only scale losses down, and one
nearly-solved transition somewhere in the memory (p near ε) does not shrink every batch's
weights, and with them the learning rate, a thousand-fold, as the memory-wide max would.
A transition enters with the priority its actor computed at the edge, or, without one, the
largest priority so far (it is seen at least once).

Priority updates come back with the learner's next request, after the ring may have overwritten
a sampled slot: every slot has a generation, bumped on each write, and an update for a slot whose
generation moved on is dropped, never applied to the transition that replaced it.

Stacked uint8 frames (Atari's obs and next_obs) go to a :class:`FrameStore`, each distinct
frame held once; the slots hold frame ids, and a sample puts the stacks back together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from faasrl.rl.frames import FRAME_ID, FrameStore, is_frame_stack


class SumTree:
    """Sums over ``capacity`` leaves (padded to a power of two) in an array heap: leaf i is
    node ``size + i``, the root node 1; drawing with prefix sums is a vectorised descent."""

    def __init__(self, capacity: int):
        self.size = 1 << max(0, (capacity - 1).bit_length())
        self.nodes = np.zeros(2 * self.size, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def leaves(self, n: int) -> np.ndarray:
        return self.nodes[self.size:self.size + n]

    def set(self, index: np.ndarray, values: np.ndarray) -> None:
        """Set leaves (a repeated index: its last value) and the sums above them, each parent
        once per level, from its two children."""
        leaves = np.asarray(index) + self.size
        self.nodes[leaves] = values
        nodes = np.unique(leaves)
        while nodes[0] > 1:
            # Halving keeps sorted nodes sorted: dropping repeats needs no sort (np.unique's).
            nodes = nodes // 2
            nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            self.nodes[nodes] = self.nodes[2 * nodes] + self.nodes[2 * nodes + 1]

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """The leaf where each cumulative sum ``prefix`` (in [0, total)) falls."""
        node = np.ones(len(prefix), dtype=np.int64)
        prefix = np.array(prefix, dtype=np.float64)
        while node[0] < self.size:
            left = self.nodes[2 * node]
            right = prefix >= left
            prefix = np.where(right, prefix - left, prefix)
            node = 2 * node + right
        return node - self.size


@dataclass(frozen=True)
class Sample:
    """A drawn batch: ``slots`` and their ``generations`` (what a priority update names),
    the transitions' arrays and their importance weights."""

    slots: np.ndarray
    generations: np.ndarray
    arrays: dict[str, np.ndarray]
    weights: np.ndarray
    priorities: np.ndarray  # p_i, before the exponent


class ReplayMemory:
    def __init__(self, capacity: int, *, alpha: float = 0.6, epsilon: float = 1e-6):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity, self.alpha, self.epsilon = capacity, alpha, epsilon
        self.tree = SumTree(capacity)
        self.generations = np.zeros(capacity, dtype=np.int64)
        self.raw = np.zeros(capacity)  # p_i before the exponent, whatever α is (for metrics)
        self.arrays: dict[str, np.ndarray] = {}  # per key, its slots (frame ids if framed)
        self.framed: frozenset[str] = frozenset()  # keys of stacked frames
        self.frames: FrameStore | None = None
        self.next = 0  # the slot the next transition goes to
        self.count = 0  # transitions held
        self.max_priority = 1.0

    def __len__(self) -> int:
        return self.count

    @property
    def bytes_per_transition(self) -> int:
        """Bytes held per transition: its slot's, plus its share of the distinct frames."""
        slot = sum(a.itemsize * int(np.prod(a.shape[1:])) for a in self.arrays.values())
        frames = self.frames.nbytes if self.frames is not None else 0
        return slot + frames // max(1, self.count)

    def add(self, batch: Mapping[str, np.ndarray], priorities: np.ndarray | None = None
            ) -> np.ndarray:
        """Append a batch of transitions (same first axis for every key), overwriting the
        oldest ones when full; ``priorities`` are |δ| (the floor is added here). Returns the
        slots written."""
        n = len(next(iter(batch.values())))
        if any(len(a) != n for a in batch.values()):
            raise ValueError("every key of a batch needs the same number of transitions")
        if not self.arrays:
            self._allocate(batch)
        elif set(batch) != set(self.arrays):
            raise ValueError(f"batch keys {sorted(batch)} are not the memory's "
                             f"{sorted(self.arrays)}")
        if n > self.capacity:  # only the newest fit
            batch = {k: a[-self.capacity:] for k, a in batch.items()}
            priorities = None if priorities is None else priorities[-self.capacity:]
            n = self.capacity
        slots = (self.next + np.arange(n)) % self.capacity
        overwritten = slots[self.generations[slots] > 0]
        replaced = [self.arrays[k][overwritten] for k in self.framed]
        for key, values in batch.items():
            self.arrays[key][slots] = self.frames.put(values) if key in self.framed else values
        for ids in replaced:  # after the new ones took theirs: shared frames stay put
            self.frames.release(ids)
        if priorities is None:
            p = np.full(n, self.max_priority)
        else:
            p = np.abs(np.asarray(priorities, dtype=np.float64)) + self.epsilon
            self.max_priority = max(self.max_priority, float(p.max()))
        self.raw[slots] = p
        self.tree.set(slots, p ** self.alpha)
        self.generations[slots] += 1
        self.next = int((self.next + n) % self.capacity)
        self.count = min(self.capacity, self.count + n)
        return slots

    def sample(self, n: int, beta: float, rng: np.random.Generator) -> Sample:
        """``n`` transitions drawn with P_i (one from each of ``n`` equal strata of the total,
        which lowers the variance of a batch's mix), with their importance weights."""
        if self.count == 0:
            raise ValueError("the memory is empty")
        total = self.tree.total
        prefix = (np.arange(n) + rng.random(n)) * (total / n)
        slots = np.minimum(self.tree.find(np.minimum(prefix, np.nextafter(total, 0))),
                           self.count - 1)
        probs = self.tree.leaves(self.capacity)[slots] / total
        weights = (probs / probs.min()) ** -beta  # (N·P_i)^-β over the batch's largest
        return Sample(slots=slots, generations=self.generations[slots].copy(),
                      arrays={k: self.frames.get(a[slots]) if k in self.framed else a[slots]
                              for k, a in self.arrays.items()},
                      weights=weights.astype(np.float32), priorities=self.raw[slots])

    def update_priorities(self, slots: np.ndarray, generations: np.ndarray,
                          priorities: np.ndarray) -> int:
        """Set the priorities (|δ|) of sampled transitions still in their slots; returns how
        many were applied (the others were overwritten since they were sampled)."""
        slots, generations = np.asarray(slots), np.asarray(generations)
        live = self.generations[slots] == generations
        if live.any():
            p = np.abs(np.asarray(priorities, dtype=np.float64)[live]) + self.epsilon
            self.max_priority = max(self.max_priority, float(p.max()))
            self.raw[slots[live]] = p
            self.tree.set(slots[live], p ** self.alpha)
        return int(live.sum())

    def _allocate(self, batch: Mapping[str, np.ndarray]) -> None:
        """Slots shaped like the first batch; stacked frames become frame ids."""
        self.framed = frozenset(k for k, a in batch.items() if is_frame_stack(a))
        self.arrays = {k: np.zeros((self.capacity, a.shape[1]), dtype=FRAME_ID)
                       if k in self.framed else
                       np.zeros((self.capacity, *a.shape[1:]), dtype=a.dtype)
                       for k, a in batch.items()}
        if self.framed:
            first = batch[min(self.framed)]
            self.frames = FrameStore(first.shape[2:])

    def state(self) -> dict[str, np.ndarray]:
        """Everything :meth:`load` needs, as arrays (a snapshot): the transitions held (and
        the frames they name), their priorities, every slot's generation and the ring's
        counters."""
        frames = {} if self.frames is None else \
            {f"frames.{k}": a for k, a in self.frames.state().items()}
        return {**{f"{'frameids' if k in self.framed else 'data'}.{k}": a[:self.count]
                   for k, a in self.arrays.items()}, **frames,
                "priorities": self.raw[:self.count],
                "generations": self.generations,
                "counters": np.array([self.next, self.count], dtype=np.int64),
                "max_priority": np.array([self.max_priority])}

    def load(self, state: Mapping[str, np.ndarray]) -> None:
        """Put a :meth:`state` back (into a memory of the same capacity)."""
        self.next, self.count = (int(x) for x in state["counters"])
        if len(state["generations"]) != self.capacity:
            raise ValueError(f"a snapshot of capacity {len(state['generations'])} does not fit "
                             f"a memory of {self.capacity}")
        self.arrays = {}
        for key, held in state.items():
            kind, _, name = key.partition(".")
            if kind in ("data", "frameids"):
                self.arrays[name] = np.zeros((self.capacity, *held.shape[1:]), dtype=held.dtype)
                self.arrays[name][:self.count] = held
        self.framed = frozenset(k[len("frameids."):] for k in state if k.startswith("frameids."))
        self.frames = FrameStore.from_state({k[len("frames."):]: a for k, a in state.items()
                                             if k.startswith("frames.")}) \
            if self.framed else None
        self.tree = SumTree(self.capacity)
        self.raw = np.zeros(self.capacity)
        if self.count:
            self.raw[:self.count] = state["priorities"]
            self.tree.set(np.arange(self.count), self.raw[:self.count] ** self.alpha)
        self.generations = np.array(state["generations"], dtype=np.int64)
        self.max_priority = float(state["max_priority"][0])
