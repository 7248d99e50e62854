"""What a published model file says about itself, so it can be used without faasrl.

Every version a learner or parameter function publishes is a safetensors file whose metadata
(string values, JSON where structured) names: the ``format``; ``algorithm`` and ``env_id``;
``env``: how to build the env the policy was trained on with gymnasium alone (``make`` arguments
and wrappers, :func:`faasrl.rl.envs.env_preprocessing`); ``observation``: its shape and dtype,
and the formula that turns it into the network's input, with the tensors holding the running
statistics; ``action_space``: discrete ``n``, or a box's shape and bounds; ``architecture``:
every layer in order with its sizes, activation and the tensors of its weights, and how the
heads make an action. ``policy`` (faasrl's :class:`~faasrl.rl.policy.PolicySpec`) and
``version`` stay for faasrl's own readers. The layers are read off the module itself, so the
card cannot describe a network other than the one whose weights it carries.
"""

from __future__ import annotations

import json
from typing import Any

from torch import nn

from faasrl.rl.envs import env_preprocessing
from faasrl.rl.policy import OBS_CLIP, OBS_EPS, PIXEL_SCALE, ActorCritic, PolicySpec

FORMAT = "faasrl.policy/1"
_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.Flatten: "flatten"}


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
    for kind, op in _ACTIVATIONS.items():
        if isinstance(module, kind):
            return {"op": op}
    raise ValueError(f"{name}: no description for a {type(module).__name__} layer")


def describe_layers(module: nn.Module, name: str) -> list[dict[str, Any]]:
    """A (nested) ``nn.Sequential``'s layers in the order they run; a single layer as one."""
    if not isinstance(module, nn.Sequential):
        return [describe_layer(module, name)]
    return [layer for i, child in enumerate(module) for layer in
            describe_layers(child, f"{name}.{i}")]


def _actor_critic(model: ActorCritic) -> dict[str, Any]:
    discrete = model.spec.action_kind == "discrete"
    return {
        "class": "ActorCritic",
        "forward": "features = trunk(input); actor(features) gives "
                   + ("the logits of a categorical distribution" if discrete else
                      "the mean of a normal distribution with std exp(log_std), per dimension")
                   + "; critic(features) the state value",
        "deterministic_action": "argmax(logits)" if discrete else
                                "the mean, clipped to the action space's bounds",
        "trunk": describe_layers(model.trunk, "trunk"),
        "actor": describe_layers(model.actor, "actor"),
        "critic": describe_layers(model.critic, "critic"),
        **({} if discrete else {"log_std": "log_std"}),
    }


def _layers_of(model: nn.Module) -> dict[str, Any]:
    """Any other model (DQN's and SAC's): every layer with weights or an activation, by name,
    in registration order; its forward is the algorithm's (faasrl/algorithms/)."""
    leaves = [(name, m) for name, m in model.named_modules()
              if not list(m.children()) and name]
    return {"class": type(model).__name__,
            "layers": [{"name": name, **describe_layer(m, name)} for name, m in leaves]}


def _observation(spec: PolicySpec, model: nn.Module) -> dict[str, Any]:
    obs: dict[str, Any] = {"shape": list(spec.obs_shape), "dtype": spec.obs_dtype}
    if not isinstance(model, ActorCritic):
        return obs
    if spec.normalize_obs:
        obs["input"] = "clip((float64(obs) - obs_mean) / sqrt(obs_var + eps), -clip, clip), " \
                       "as float32"
        obs["normalization"] = {"mean": "obs_mean", "var": "obs_var", "count": "obs_count",
                                "eps": OBS_EPS, "clip": OBS_CLIP}
    else:
        divide_by = PIXEL_SCALE if spec.arch == "cnn" else 1.0
        obs["input"] = f"float32(obs) / {divide_by:g}"
        obs["divide_by"] = divide_by
    return obs


def _action_space(spec: PolicySpec) -> dict[str, Any]:
    if spec.action_kind == "discrete":
        return {"type": "discrete", "n": spec.action_dim}
    return {"type": "box", "shape": [spec.action_dim], "low": list(spec.action_low),
            "high": list(spec.action_high)}


def model_card(model: nn.Module, spec: PolicySpec, *, env_id: str, algorithm: str
               ) -> dict[str, str]:
    """The metadata a published version of ``model`` carries (``version`` is added by the
    parameter store)."""
    architecture = _actor_critic(model) if isinstance(model, ActorCritic) else _layers_of(model)
    card = {
        "format": FORMAT, "algorithm": algorithm, "env_id": env_id,
        "env": env_preprocessing(env_id, spec.action_kind == "continuous"),
        "observation": _observation(spec, model), "action_space": _action_space(spec),
        "architecture": architecture, "policy": spec.to_dict(),
    }
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in card.items()}
