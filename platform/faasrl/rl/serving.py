"""A published model answering observations as its job's evaluation acts: the policy
function's core (``functions/policy``).

The model is rebuilt from a version's own file with faasrl's networks (the card's
``architecture.class`` and ``policy`` spec; nothing of the env's code), so a deterministic
answer is the action the job's evaluation takes for that observation: PPO's and IMPACT's mode
(continuous ones clipped to the action box, as the env's ``ClipAction`` does), DQN's greedy
action, SAC's tanh(mean) in the box. Preprocessing is the model's own (running observation
statistics, frames scaled), inside its forward.

A request is ``{"obs": ...}``: one observation (its shape is the model's) or a batch (one axis
more); a nested list, or ``{"b64", "dtype", "shape"}`` (the raw bytes, for frames). Models on
stacked frames also take one frame with a ``session``: the frame stack is kept here, per
session (``reset: true`` starts one with its frame repeated, as the env's frame stack starts
an episode). Whatever cannot be taken raises :class:`InvalidArgs` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import threading
from collections import OrderedDict
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, Field, ValidationError

from faasrl.algorithms.dqn import QLearner
from faasrl.algorithms.sac import Config as SACConfig
from faasrl.algorithms.sac import SoftActorCritic, squashed_gaussian
from faasrl.data.codec import decode_tensors
from faasrl.rl.frames import is_stacked_frames
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.runtime.invalid import InvalidArgs
from faasrl.user_input import STRICT

MAX_SESSIONS = 1024  # frame stacks a container keeps (least recently used ones go first)
DQN_SAMPLE_EPSILON = 0.05  # DQN's ``sample``: ε-greedy with this ε unless the request says
_DTYPES = ("uint8", "float32", "float64")  # what a ``b64`` observation may be
OUTPUTS = {ActorCritic: ("values", "log_probs"), QLearner: ("values", "q_values"),
           SoftActorCritic: ("values", "log_probs")}


class PolicyRequest(BaseModel):
    """What the policy function takes (``obs`` is checked against the model's shape)."""

    model_config = STRICT

    obs: Any = Field(description="one observation or a batch (one axis more): a nested list, "
                                 "or {b64, dtype, shape}")
    outputs: list[Literal["values", "q_values", "log_probs"]] = Field(
        default_factory=list, description="more than the actions")
    sample: bool = Field(False, description="sample the policy (default: its mode)")
    epsilon: float = Field(DQN_SAMPLE_EPSILON, ge=0, le=1,
                           description="DQN's sample: ε-greedy with this ε")
    session: str | None = Field(None, min_length=1, max_length=128,
                                description="frames: obs is one frame of this session")
    reset: bool = Field(False, description="with session: the frame starts the session")


class FrameStacks:
    """Each session's last frames (the model's stack), at most ``MAX_SESSIONS`` of them;
    shared by the container's concurrent invocations."""

    def __init__(self, stack_shape: tuple[int, ...], capacity: int = MAX_SESSIONS):
        self.shape = stack_shape
        self.capacity = capacity
        self._stacks: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def push(self, session: str, frame: np.ndarray, reset: bool) -> np.ndarray:
        """The session's stack with ``frame`` last (a reset repeats it through the stack)."""
        with self._lock:
            return self._push(session, frame, reset)

    def _push(self, session: str, frame: np.ndarray, reset: bool) -> np.ndarray:
        if reset:
            stack = np.repeat(frame[None], self.shape[0], axis=0)
        elif session in self._stacks:
            stack = np.concatenate([self._stacks[session][1:], frame[None]])
        else:
            raise InvalidArgs("session", f"{session!r} is not held here (new, or no longer "
                              "kept): send its frame with reset: true, or send stacked frames")
        self._stacks[session] = stack
        self._stacks.move_to_end(session)
        while len(self._stacks) > self.capacity:
            self._stacks.popitem(last=False)
        return stack

    def __len__(self) -> int:
        return len(self._stacks)


def _build(arch: str, spec: PolicySpec) -> torch.nn.Module:
    if arch == "ActorCritic":
        return ActorCritic(spec)
    if arch == "QLearner":
        return QLearner(spec)
    if arch == "SoftActorCritic":
        return SoftActorCritic(spec, SACConfig())  # its temperature comes with the weights
    raise ValueError(f"a model card names class {arch!r}, which faasrl cannot serve")


class ServedPolicy:
    def __init__(self, blob: bytes):
        state, meta = decode_tensors(blob)
        self.version = int(meta["version"])
        self.algorithm = meta["algorithm"]
        self.spec = PolicySpec.from_dict(json.loads(meta["policy"]))
        self.model = _build(json.loads(meta["architecture"])["class"], self.spec)
        self.model.load_state_dict(state)
        self.model.eval()
        self.dtype = np.dtype(self.spec.obs_dtype)
        self.frames = (FrameStacks(self.spec.obs_shape)
                       if is_stacked_frames(self.dtype, self.spec.obs_shape) else None)

    def answer(self, args: Any) -> dict[str, Any]:
        """``{"actions", "version"}`` and the outputs asked for, for a request's args."""
        request = parse_request(args)
        allowed = OUTPUTS[type(self.model)]
        if bad := [o for o in request.outputs if o not in allowed]:
            raise InvalidArgs("outputs", f"{', '.join(bad)}: a {self.algorithm} model answers "
                                         f"{', '.join(allowed)}")
        obs, batched = self.observations(request)
        with torch.no_grad():
            out = self._forward(torch.from_numpy(obs), request)
        shown = {k: (v if batched else v[0]).tolist() for k, v in out.items()}
        return {"actions": shown.pop("actions"), "version": self.version, **shown}

    def observations(self, request: PolicyRequest) -> tuple[np.ndarray, bool]:
        """The request's observations as a batch of the model's dtype, and whether it came as
        one (else a single observation, or a session's frame, stacked here)."""
        obs = _array(request.obs, self.dtype)
        shape = tuple(self.spec.obs_shape)
        if request.session is not None or request.reset:
            if self.frames is None:
                raise InvalidArgs("session", "only models on stacked frames keep sessions")
            if request.session is None:
                raise InvalidArgs("session", "reset needs the session it starts")
            if obs.shape != shape[1:]:
                raise InvalidArgs("obs", f"with a session, one frame of shape {list(shape[1:])}"
                                         f"; got {list(obs.shape)}")
            return self.frames.push(request.session, obs, request.reset)[None], False
        if obs.shape == shape:
            return obs[None], False
        if obs.ndim == len(shape) + 1 and obs.shape[1:] == shape:
            return obs, True
        frame = f", or one frame {list(shape[1:])} with a session" if self.frames else ""
        raise InvalidArgs("obs", f"expected shape {list(shape)} or [batch, "
                                 f"{', '.join(map(str, shape))}]{frame}; got {list(obs.shape)}")

    def _forward(self, obs: torch.Tensor, request: PolicyRequest) -> dict[str, torch.Tensor]:
        for kind, forward in _FORWARDS.items():
            if isinstance(self.model, kind):
                return forward(self.model, obs, request)
        raise TypeError(f"no forward for a {type(self.model).__name__}")


def _actor_critic(model: ActorCritic, obs: torch.Tensor, request: PolicyRequest
                  ) -> dict[str, torch.Tensor]:
    """The mode (argmax, or the mean clipped to the box as the env's ClipAction does) or a
    sample; log-probs of the action before clipping, as training scores it."""
    spec = model.spec
    features = model.features(obs)
    head = model.actor(features)
    if request.sample:
        raw = model._dist(head).sample()
    else:
        raw = head.argmax(-1) if spec.action_kind == "discrete" else head
    actions = raw if spec.action_kind == "discrete" else raw.clamp(
        torch.tensor(spec.action_low, dtype=raw.dtype),
        torch.tensor(spec.action_high, dtype=raw.dtype))
    out = {"actions": actions}
    if "log_probs" in request.outputs:
        out["log_probs"] = model.log_prob(head, raw)
    if "values" in request.outputs:
        out["values"] = model.critic(features).squeeze(-1)
    return out


def _q_learner(model: QLearner, obs: torch.Tensor, request: PolicyRequest
               ) -> dict[str, torch.Tensor]:
    """Greedy, or ε-greedy with the request's ε when sampling."""
    q = model.online(obs)
    actions = q.argmax(1)
    if request.sample:
        explores = torch.rand(len(q)) < request.epsilon
        actions = torch.where(explores, torch.randint(q.shape[1], (len(q),)), actions)
    out = {"actions": actions}
    if "values" in request.outputs:
        out["values"] = q.max(1).values
    if "q_values" in request.outputs:
        out["q_values"] = q
    return out


def _soft_actor_critic(model: SoftActorCritic, obs: torch.Tensor, request: PolicyRequest
                       ) -> dict[str, torch.Tensor]:
    """tanh(mean) (no noise) or a squashed-Gaussian sample, in the action box; Q1 at it."""
    mean, log_std = model._mean_log_std(obs)
    noise = torch.randn_like(mean) if request.sample else torch.zeros_like(mean)
    unit, log_probs = squashed_gaussian(mean, log_std, noise)
    out = {"actions": model.to_env(unit)}
    if "log_probs" in request.outputs:
        out["log_probs"] = log_probs
    if "values" in request.outputs:
        out["values"] = model.q1(obs, unit).squeeze(-1)
    return out


_FORWARDS: dict[type, Any] = {ActorCritic: _actor_critic, QLearner: _q_learner,
                              SoftActorCritic: _soft_actor_critic}


def parse_request(args: Any) -> PolicyRequest:
    if not isinstance(args, dict):
        raise InvalidArgs("obs", "expected an object {\"obs\": ...}")
    try:
        return PolicyRequest.model_validate(args)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "obs"
        raise InvalidArgs(field, err["msg"]) from None


def _array(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` (nested lists of numbers, or ``{b64, dtype, shape}``) as an array of
    ``dtype``, refusing what would change in the cast: non-numbers, NaN and infinities,
    fractions or values out of range for integer frames."""
    if isinstance(value, dict):
        return _from_b64(value, dtype)
    if not isinstance(value, list):
        raise InvalidArgs("obs", f"expected a list of numbers (nested as the observation's "
                                 f"shape), got {type(value).__name__}")
    try:
        raw = np.asarray(value)
    except ValueError:
        raise InvalidArgs("obs", "ragged: every row must have the same length") from None
    if raw.dtype.kind not in "iuf":  # booleans, strings, nulls, objects
        raise InvalidArgs("obs", f"expected numbers only (the model takes {dtype})")
    return _checked(raw, dtype)


def _from_b64(value: dict[str, Any], dtype: np.dtype) -> np.ndarray:
    if set(value) != {"b64", "dtype", "shape"}:
        raise InvalidArgs("obs", "as an object: exactly b64, dtype and shape")
    shape, kind = value["shape"], value["dtype"]
    if kind not in _DTYPES:
        raise InvalidArgs("obs", f"dtype {kind!r}: one of {', '.join(_DTYPES)}")
    if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise InvalidArgs("obs", "shape: a list of sizes")
    try:
        data = base64.b64decode(value["b64"], validate=True)
    except (TypeError, ValueError, binascii.Error):
        raise InvalidArgs("obs", "b64: not base64") from None
    if len(data) != math.prod(shape) * np.dtype(kind).itemsize:
        raise InvalidArgs("obs", f"b64: {len(data)} bytes, not {shape} of {kind}")
    return _checked(np.frombuffer(bytearray(data), dtype=kind).reshape(shape), dtype)


def _checked(raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if raw.dtype.kind == "f" and not np.isfinite(raw).all():
        raise InvalidArgs("obs", "NaN or infinite values")
    if dtype.kind == "u" and raw.dtype != dtype:
        info = np.iinfo(dtype)
        if (raw.dtype.kind == "f" and (raw != np.round(raw)).any()) \
                or raw.min(initial=0) < info.min or raw.max(initial=0) > info.max:
            raise InvalidArgs("obs", f"the model takes {dtype} frames: whole numbers "
                                     f"{info.min}..{info.max}")
    return np.ascontiguousarray(raw, dtype=dtype)
