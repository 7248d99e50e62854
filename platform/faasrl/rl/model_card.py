"""What a published model file says about itself, so it can be used without faasrl.

Every version a learner or parameter function publishes is a safetensors file whose metadata
(string values, JSON where structured) names: the ``format``; ``algorithm`` and ``env_id``;
``env``: how to build the env the policy was trained on with gymnasium alone (``make`` arguments,
or for an env brought as code its ``code``: entry point, imports, kwargs, episode limit; then
wrappers, :func:`faasrl.rl.envs.env_preprocessing`); ``observation``: its shape and dtype,
and the formula that turns it into the network's input, with the tensors holding the running
statistics; ``action_space``: discrete ``n``, or a box's shape and bounds; ``architecture``:
the model's forward pass as data, the same shape for every algorithm (:data:`RULES`), and
``network``, the job's ``model`` section as it was built (hidden widths, activation, CNN,
shared trunk, dueling). ``policy`` (faasrl's :class:`~faasrl.rl.policy.PolicySpec`, the
model's own) and ``version`` stay for faasrl's own readers. The layers are read off the
modules themselves, so the card cannot describe a network other than the one whose weights it
carries.

``architecture.forward`` is a list of steps run in order over a batch, each naming its result
``name`` and its inputs ``of`` (``"obs"``, the observation after ``observation.input``, or an
earlier step's name). A step either has ``layers`` (its inputs concatenated along the last
axis, then each layer in turn: linear or conv2d with its sizes and weight tensors,
an activation of :data:`faasrl.rl.model_spec.ACTIVATIONS`, flatten, maxpool2d, or residual:
its own ``layers`` applied to the input and added to it) or a ``rule`` from
:data:`RULES`, whose ``formula`` it repeats. The step
named ``action`` is the policy's deterministic action, the one faasrl's evaluation takes.
"""

from __future__ import annotations

import json
from typing import Any

from torch import nn

from faasrl.algorithms.dqn import QLearner
from faasrl.algorithms.sac import LOG_STD_MAX, LOG_STD_MIN, SoftActorCritic
from faasrl.env_code import EnvCode, EnvDescription
from faasrl.rl.cnn import Residual
from faasrl.rl.envs import env_preprocessing
from faasrl.rl.model_spec import ACTIVATIONS
from faasrl.rl.policy import OBS_CLIP, OBS_EPS, PIXEL_SCALE, ActorCritic, PolicySpec

FORMAT = "faasrl.policy/2"
# Parameter-free layers -> their op (a leaky ReLU's slope is torch's default, 0.01).
_OPS = {getattr(nn, cls): name for name, cls in ACTIVATIONS.items()} | {nn.Flatten: "flatten"}
# The combination rules a forward step may use, over its inputs x0, x1 (last axis: features).
RULES = {
    "argmax": "argmax(x0)",
    "clip": "clip(x0, action_space.low, action_space.high)",
    "first": "x0[..., :n]",
    "tanh": "tanh(x0)",
    "to_bounds": "(high + low) / 2 + (high - low) / 2 * x0, with the action space's bounds",
    "dueling": "x0 + x1 - mean(x1)",
}


def describe_layer(module: nn.Module, name: str) -> dict[str, Any]:
    """One layer: its op, sizes and (for layers with weights) the tensors that hold them."""
    if isinstance(module, nn.Linear):
        return {"op": "linear", "in": module.in_features, "out": module.out_features,
                "weight": f"{name}.weight", "bias": f"{name}.bias"}
    if isinstance(module, nn.Conv2d):
        return {"op": "conv2d", "in": module.in_channels, "out": module.out_channels,
                "kernel": module.kernel_size[0], "stride": module.stride[0],
                "padding": module.padding[0], "weight": f"{name}.weight",
                "bias": f"{name}.bias"}
    if isinstance(module, nn.MaxPool2d):
        return {"op": "maxpool2d", "kernel": module.kernel_size, "stride": module.stride,
                "padding": module.padding}
    if isinstance(module, Residual):
        return {"op": "residual", "layers": describe_layers(module.block, f"{name}.block")}
    if type(module) in _OPS:
        return {"op": _OPS[type(module)]}
    raise ValueError(f"{name}: no description for a {type(module).__name__} layer")


def describe_layers(module: nn.Module, name: str) -> list[dict[str, Any]]:
    """A (nested) ``nn.Sequential``'s layers in the order they run; a single layer as one."""
    if not isinstance(module, nn.Sequential):
        return [describe_layer(module, name)]
    return [layer for i, child in enumerate(module) for layer in
            describe_layers(child, f"{name}.{i}")]


def _net(name: str, of: list[str], module: nn.Module) -> dict[str, Any]:
    """A step running ``module``, whose tensors are named ``name.*`` in the state dict."""
    return {"name": name, "of": of, "layers": describe_layers(module, name)}


def _rule(name: str, rule: str, of: list[str], **args: Any) -> dict[str, Any]:
    return {"name": name, "rule": rule, "of": of, **args, "formula": RULES[rule]}


def _actor_critic(model: ActorCritic) -> dict[str, Any]:
    discrete = model.spec.action_kind == "discrete"
    return {
        "class": "ActorCritic",
        "distribution": {"type": "categorical", "logits": "actor"} if discrete else
                        {"type": "normal", "mean": "actor", "log_std": "log_std (a tensor)"},
        "forward": [_net("trunk", ["obs"], model.trunk),
                    _net("actor", ["trunk"], model.actor),
                    _net("critic", ["trunk"], model.critic),
                    _rule("action", "argmax" if discrete else "clip", ["actor"])],
        "value": "critic",
    }


def _q_learner(model: QLearner) -> dict[str, Any]:
    """DQN: the online network; the target network's tensors (``target.*``) ride along."""
    trunk = _net("online.trunk", ["obs"], model.online.trunk)
    return {
        "class": "QLearner",
        "forward": [trunk,
                    _net("online.value", ["online.trunk"], model.online.value),
                    _net("online.advantage", ["online.trunk"], model.online.advantage),
                    _rule("q", "dueling", ["online.value", "online.advantage"]),
                    _rule("action", "argmax", ["q"])],
        "value": "q",
    }


def _soft_actor_critic(model: SoftActorCritic) -> dict[str, Any]:
    """SAC: the actor's squashed Gaussian, and the twin critics at the deterministic action
    (in the unit box, as they are trained); the target critics' tensors ride along."""
    dims = model.action_scale.numel()
    actor = _net("actor", ["flat"], model.actor)
    return {
        "class": "SoftActorCritic",
        "distribution": {"type": "tanh_normal", "mean": "actor[..., :d]",
                         "log_std": f"clip(actor[..., d:], {LOG_STD_MIN}, {LOG_STD_MAX})",
                         "squash": "tanh, then to_bounds", "d": dims},
        "forward": [_net("flat", ["obs"], nn.Flatten()), actor,
                    _rule("mean", "first", ["actor"], n=dims),
                    _rule("unit_action", "tanh", ["mean"]),
                    _rule("action", "to_bounds", ["unit_action"]),
                    _net("q1.net", ["flat", "unit_action"], model.q1.net),
                    _net("q2.net", ["flat", "unit_action"], model.q2.net)],
        "value": "q1.net",
    }


def _network(spec: PolicySpec, model: nn.Module) -> dict[str, Any]:
    """The network's shape in the model section's words (what a job would ask to get it)."""
    return {"hidden": list(spec.hidden), "activation": spec.activation,
            "cnn": spec.cnn, "shared_trunk": spec.shared_trunk,
            "dueling": isinstance(model, QLearner)}


def _architecture(model: nn.Module) -> dict[str, Any]:
    """The model's forward as data, and its network, for each kind of model jobs publish."""
    for kind, describe in ((ActorCritic, _actor_critic), (QLearner, _q_learner),
                           (SoftActorCritic, _soft_actor_critic)):
        if isinstance(model, kind):
            return {**describe(model), "network": _network(model.spec, model)}
    raise ValueError(f"no model card for a {type(model).__name__}")


def _observation(spec: PolicySpec, model: nn.Module) -> dict[str, Any]:
    obs: dict[str, Any] = {"shape": list(spec.obs_shape), "dtype": spec.obs_dtype}
    if isinstance(model, ActorCritic) and spec.normalize_obs:
        obs["input"] = "clip((float64(obs) - obs_mean) / sqrt(obs_var + eps), -clip, clip), " \
                       "as float32"
        obs["normalization"] = {"mean": "obs_mean", "var": "obs_var", "count": "obs_count",
                                "eps": OBS_EPS, "clip": OBS_CLIP}
    else:  # frames: the actor-critic's CNN and DQN's network on uint8 observations
        pixels = spec.arch != "mlp" if isinstance(model, ActorCritic) else \
            isinstance(model, QLearner) and model.online.pixels
        divide_by = PIXEL_SCALE if pixels else 1.0
        obs["input"] = f"float32(obs) / {divide_by:g}"
        obs["divide_by"] = divide_by
    return obs


def _action_space(spec: PolicySpec) -> dict[str, Any]:
    if spec.action_kind == "discrete":
        return {"type": "discrete", "n": spec.action_dim}
    return {"type": "box", "shape": [spec.action_dim], "low": list(spec.action_low),
            "high": list(spec.action_high)}


def model_card(model: nn.Module, *, env_id: str, algorithm: str, env: EnvCode | None = None,
               description: EnvDescription | None = None) -> dict[str, str]:
    """The metadata a published version of ``model`` (its ``spec`` says its spaces and
    network) carries (``version`` is added by the parameter store). ``env``, ``description``:
    the job's env code and what its probe found (whose ``preprocessing`` names the wrappers it
    saw applied)."""
    spec: PolicySpec = model.spec
    preprocessing = description.preprocessing if description is not None else None
    card = {
        "format": FORMAT, "algorithm": algorithm, "env_id": env_id,
        "env": preprocessing or env_preprocessing(env_id, spec.action_kind == "continuous",
                                                  env),
        "observation": _observation(spec, model), "action_space": _action_space(spec),
        "architecture": _architecture(model), "policy": spec.to_dict(),
    }
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in card.items()}
