"""Stacked frames stored once: Atari observations in a replay memory share their frames.

A frame stack of 4 repeats each frame in four consecutive observations, and an n-step
transition holds two stacks (obs and next_obs): stored as they come, each frame is held about
eight times. The store keeps every distinct frame once, found by its content's hash (so it
does not matter which actor call, env or transition a frame came with), with a count of the
transition slots that name it; a frame no slot names any more is freed for the next one.
Transitions hold int32 frame ids instead of pixels.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

DIGEST = 16  # bytes of blake2b per frame: collisions are out of reach at any memory size
FRAME_ID = np.dtype(np.int32)  # what a transition slot holds per frame of a stack
FRAMES_PER_TRANSITION = 2  # distinct frames held per transition, at most: an episode of L
# steps brings L + 1 (its reset frame and one per step), whatever the stack and n-step


def is_stacked_frames(dtype: str | np.dtype, shape: tuple[int, ...]) -> bool:
    """One observation of stacked uint8 frames (Atari's (stack, 84, 84))."""
    return np.dtype(dtype) == np.uint8 and len(shape) == 3


def is_frame_stack(values: np.ndarray) -> bool:
    """A batch of stacked-frame observations (the row axis first)."""
    return is_stacked_frames(values.dtype, values.shape[1:])


class FrameStore:
    def __init__(self, frame_shape: tuple[int, ...], capacity: int = 1024):
        self.frame_shape = tuple(frame_shape)
        self.frames = np.zeros((capacity, *self.frame_shape), dtype=np.uint8)
        self.refs = np.zeros(capacity, dtype=np.int64)  # slots naming each frame
        self.digests = np.zeros((capacity, DIGEST), dtype=np.uint8)
        self._ids: dict[bytes, int] = {}  # digest -> id, for every live frame
        self._free = list(range(capacity - 1, -1, -1))  # lowest id on top
        self.high = 0  # ids below it were ever used: what a snapshot holds

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def nbytes(self) -> int:
        """Bytes of the live frames."""
        return len(self._ids) * self.frames[0].nbytes

    def put(self, stacks: np.ndarray) -> np.ndarray:
        """Frame ids (n, stack) for a batch of stacks (n, stack, *frame), each id's count
        raised once per place it is named."""
        flat = np.ascontiguousarray(stacks).reshape(-1, *self.frame_shape)
        ids = np.empty(len(flat), dtype=FRAME_ID)
        for i, frame in enumerate(flat):
            digest = hashlib.blake2b(frame.data, digest_size=DIGEST).digest()
            frame_id = self._ids.get(digest)
            if frame_id is None:
                frame_id = self._allocate()
                self.frames[frame_id] = frame
                self.digests[frame_id] = np.frombuffer(digest, dtype=np.uint8)
                self._ids[digest] = frame_id
            ids[i] = frame_id
        np.add.at(self.refs, ids, 1)
        return ids.reshape(stacks.shape[:2])

    def release(self, ids: np.ndarray) -> None:
        """Drop one count per place ``ids`` named a frame; frames named nowhere are freed."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        np.subtract.at(self.refs, ids, 1)
        for frame_id in np.unique(ids[self.refs[ids] == 0]).tolist():
            del self._ids[self.digests[frame_id].tobytes()]
            self._free.append(frame_id)

    def get(self, ids: np.ndarray) -> np.ndarray:
        """The stacks (n, stack, *frame) that ids (n, stack) name."""
        return self.frames[ids]

    def _allocate(self) -> int:
        if not self._free:  # double: amortised O(1) per frame, no fixed cap to guess
            grown = len(self.refs)
            self.frames = np.concatenate([self.frames, np.zeros_like(self.frames)])
            self.refs = np.concatenate([self.refs, np.zeros_like(self.refs)])
            self.digests = np.concatenate([self.digests, np.zeros_like(self.digests)])
            self._free = list(range(2 * grown - 1, grown - 1, -1))
        frame_id = self._free.pop()
        self.high = max(self.high, frame_id + 1)
        return frame_id

    def state(self) -> dict[str, np.ndarray]:
        """The ids ever used (freed ones included: their refs say so), for a snapshot."""
        return {"frames": self.frames[:self.high], "refs": self.refs[:self.high],
                "digests": self.digests[:self.high]}

    @classmethod
    def from_state(cls, state: Mapping[str, np.ndarray]) -> FrameStore:
        frames = state["frames"]
        store = cls(frames.shape[1:], capacity=max(1, len(frames)))
        store.high = len(frames)
        store.frames[:store.high] = frames
        store.refs[:store.high] = state["refs"]
        store.digests[:store.high] = state["digests"]
        live = np.flatnonzero(store.refs > 0)
        store._ids = {store.digests[i].tobytes(): int(i) for i in live}
        store._free = np.flatnonzero(store.refs == 0)[::-1].tolist()
        return store
