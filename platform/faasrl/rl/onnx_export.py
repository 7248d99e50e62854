"""A published model file as ONNX: the acting network, its preprocessing inside the graph.

Built from the file itself, not from faasrl's torch modules: the model card
(:mod:`faasrl.rl.model_card`) states the forward pass as data (``architecture.forward``: steps
of layers and combination rules, with the names of their tensors) and the observation's input
formula (``observation``: normalisation with the running statistics and a clip, or a pixel
scale), so one translation of those few ops covers every algorithm and network a job can
train, with numpy and onnx alone. No torch: the gateway, which never imports it, answers
``GET /v1/jobs/{id}/model?format=onnx``. The tensors keep their names in the graph
(``obs_mean``, ``actor.0.weight``, ...), so the ONNX file and the safetensors one read alike.

The graph's input ``obs`` is a batch of observations as the card states them (its ``shape``
and ``dtype``: uint8 frames, or float32 vectors, which is what faasrl's rollout and
evaluation cast every float observation to), the batch dimension dynamic. Its outputs:
``action``, the deterministic action faasrl's evaluation takes (:data:`OUTPUTS` says the
others). The card's description of everything else (env, observation, action space, network,
version) is copied into the model's ``metadata_props``.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import safetensors.numpy
from onnx import TensorProto, helper, numpy_helper

FORMAT = "faasrl.onnx/1"
# ONNX 1.12's opset and IR version (2022): runtimes of the last years all load them; nothing
# newer is needed (GELU's erf form stands in for opset 20's Gelu).
OPSET, IR_VERSION = 17, 8
DTYPES = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8}
# The graph's outputs besides ``action``: the step each names in the card, and what it is.
OUTPUTS = {
    "value": "the card's architecture.value step: V(s) (batch, 1) of an actor-critic, "
             "Q(s, .) (batch, n) of DQN, Q1(s, action) (batch, 1) of SAC",
    "logits": "a categorical policy's logits (batch, n)",
    "mean": "a Gaussian policy's mean (batch, d): before the clip of an actor-critic, "
            "before tanh and the bounds of SAC",
}
# The card's metadata copied to the ONNX model's metadata_props as they are.
CARD_PROPS = ("algorithm", "env_id", "version", "env", "observation", "action_space")


class NotExportable(ValueError):
    """A model file ONNX cannot be built from (no forward card, an op it does not know)."""


def card_metadata(blob: bytes) -> dict[str, Any]:
    """A safetensors file's ``__metadata__`` (its first 8 bytes give the header's size), JSON
    values decoded."""
    (size,) = struct.unpack("<Q", blob[:8])
    meta = json.loads(blob[8:8 + size]).get("__metadata__") or {}
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in meta.items()}


class _Graph:
    """Nodes and initializers as they are added, each result under a fresh name."""

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        self.tensors = tensors
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self._count = 0

    def tensor(self, name: str) -> str:
        """One of the file's tensors, as an initializer of its own name."""
        if name not in self.tensors:
            raise NotExportable(f"the card names tensor {name!r}, which the file lacks")
        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(self.tensors[name], name)
        return name

    def const(self, value: Any, dtype: type = np.float32) -> str:
        name = f"const_{len(self.initializers)}"
        self.initializers[name] = numpy_helper.from_array(np.asarray(value, dtype), name)
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        self._count += 1
        out = out or f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def _pair(value: int | list[int]) -> list[int]:
    return [value, value] if isinstance(value, int) else list(value)


def _gelu(g: _Graph, x: str) -> str:
    """torch's exact GELU: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    erf = g.op("Erf", g.op("Mul", x, g.const(1 / math.sqrt(2))))
    return g.op("Mul", g.op("Mul", x, g.const(0.5)), g.op("Add", erf, g.const(1.0)))


# Parameter-free layers (the card's ops: faasrl.rl.model_spec.ACTIVATIONS and flatten) as ONNX.
ACTIVATION_OPS: dict[str, Callable[[_Graph, str], str]] = {
    "tanh": lambda g, x: g.op("Tanh", x),
    "relu": lambda g, x: g.op("Relu", x),
    "elu": lambda g, x: g.op("Elu", x, alpha=1.0),
    "gelu": _gelu,
    "silu": lambda g, x: g.op("Mul", x, g.op("Sigmoid", x)),
    "leaky_relu": lambda g, x: g.op("LeakyRelu", x, alpha=0.01),  # torch's default slope
    "flatten": lambda g, x: g.op("Flatten", x, axis=1),
}


def _layer(g: _Graph, x: str, layer: dict[str, Any]) -> str:
    match layer["op"]:
        case "linear":
            return g.op("Gemm", x, g.tensor(layer["weight"]), g.tensor(layer["bias"]), transB=1)
        case "conv2d":
            return g.op("Conv", x, g.tensor(layer["weight"]), g.tensor(layer["bias"]),
                        kernel_shape=_pair(layer["kernel"]), strides=_pair(layer["stride"]),
                        pads=_pair(layer["padding"]) * 2)
        case "maxpool2d":
            return g.op("MaxPool", x, kernel_shape=_pair(layer["kernel"]),
                        strides=_pair(layer["stride"]), pads=_pair(layer["padding"]) * 2)
        case "residual":
            return g.op("Add", x, _layers(g, x, layer["layers"]))
        case op if op in ACTIVATION_OPS:
            return ACTIVATION_OPS[op](g, x)
    raise NotExportable(f"no ONNX for a {layer['op']!r} layer")


def _layers(g: _Graph, x: str, layers: list[dict[str, Any]]) -> str:
    for layer in layers:
        x = _layer(g, x, layer)
    return x


def _bounds(action_space: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(action_space["low"], np.float32),
            np.asarray(action_space["high"], np.float32))


def _clip(g: _Graph, x: str, space: dict[str, Any]) -> str:
    """torch's clamp(x, low, high): min(max(x, low), high)."""
    low, high = _bounds(space)
    return g.op("Min", g.op("Max", x, g.const(low)), g.const(high))


def _to_bounds(g: _Graph, x: str, space: dict[str, Any]) -> str:
    """SAC's to_env: (high + low) / 2 + (high - low) / 2 * x, in float32 as its buffers."""
    low, high = _bounds(space)
    return g.op("Add", g.const((high + low) / 2), g.op("Mul", g.const((high - low) / 2), x))


# The card's combination rules (faasrl.rl.model_card.RULES) over a step's inputs ``xs``.
RULE_OPS: dict[str, Callable[[_Graph, list[str], dict[str, Any], dict[str, Any]], str]] = {
    "argmax": lambda g, xs, step, space: g.op("ArgMax", xs[0], axis=-1, keepdims=0),
    "clip": lambda g, xs, step, space: _clip(g, xs[0], space),
    "first": lambda g, xs, step, space: g.op(
        "Slice", xs[0], g.const([0], np.int64), g.const([step["n"]], np.int64),
        g.const([-1], np.int64)),
    "tanh": lambda g, xs, step, space: g.op("Tanh", xs[0]),
    "to_bounds": lambda g, xs, step, space: _to_bounds(g, xs[0], space),
    "dueling": lambda g, xs, step, space: g.op(
        "Sub", g.op("Add", xs[0], xs[1]), g.op("ReduceMean", xs[1], axes=[-1], keepdims=1)),
}


def _preprocess(g: _Graph, observation: dict[str, Any]) -> str:
    """``observation.input``: clip((float64(obs) - mean) / sqrt(var + eps), -clip, clip) as
    float32, or float32(obs) / divide_by."""
    norm = observation.get("normalization")
    if norm is None:
        x = g.op("Cast", "obs", to=TensorProto.FLOAT)
        return x if observation["divide_by"] == 1 else \
            g.op("Div", x, g.const(observation["divide_by"]))
    x = g.op("Sub", g.op("Cast", "obs", to=TensorProto.DOUBLE), g.tensor(norm["mean"]))
    std = g.op("Sqrt", g.op("Add", g.tensor(norm["var"]), g.const(norm["eps"], np.float64)))
    x = g.op("Clip", g.op("Div", x, std), g.const(-norm["clip"], np.float64),
             g.const(norm["clip"], np.float64))
    return g.op("Cast", x, to=TensorProto.FLOAT)


def _outputs(architecture: dict[str, Any]) -> dict[str, str]:
    """Output name -> the card's step it shows."""
    outputs = {"action": "action", "value": architecture["value"]}
    dist = architecture.get("distribution") or {}
    if dist.get("type") == "categorical":
        outputs["logits"] = dist["logits"]
    elif dist.get("type") == "normal":
        outputs["mean"] = dist["mean"]
    elif dist.get("type") == "tanh_normal":
        outputs["mean"] = "mean"
    return outputs


def _needed(steps: list[dict[str, Any]], wanted: set[str]) -> list[dict[str, Any]]:
    """The steps the outputs depend on, in order (DQN's and SAC's target networks are not
    steps at all; an actor-critic's critic is one, for ``value``)."""
    need = set(wanted)
    for step in reversed(steps):
        if step["name"] in need:
            need.update(step["of"])
    return [step for step in steps if step["name"] in need]


def _metadata(meta: dict[str, Any]) -> dict[str, str]:
    props = {k: meta[k] for k in CARD_PROPS if k in meta}
    props |= {"format": FORMAT, "card_format": meta.get("format", ""),
              "network": meta["architecture"].get("network", {}),
              "preprocessing": meta["observation"]["input"], "outputs": OUTPUTS}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in props.items()}


def to_onnx(blob: bytes) -> bytes:
    """The ONNX model (serialized protobuf) of a published model file (safetensors bytes)."""
    try:
        meta = card_metadata(blob)
        steps = meta["architecture"]["forward"]
        observation, space = meta["observation"], meta["action_space"]
    except (KeyError, TypeError, ValueError, struct.error) as exc:
        raise NotExportable(f"not a model file with a forward card: {exc}") from None
    if observation["dtype"] not in DTYPES:
        raise NotExportable(f"no ONNX input for observations of dtype {observation['dtype']}")
    g = _Graph(safetensors.numpy.load(blob))
    outputs = _outputs(meta["architecture"])
    results = {"obs": _preprocess(g, observation)}
    for step in _needed(steps, set(outputs.values())):
        xs = [results[name] for name in step["of"]]
        if "layers" in step:
            x = xs[0] if len(xs) == 1 else g.op("Concat", *xs, axis=-1)
            results[step["name"]] = _layers(g, x, step["layers"])
        elif step.get("rule") in RULE_OPS:
            results[step["name"]] = RULE_OPS[step["rule"]](g, xs, step, space)
        else:
            raise NotExportable(f"no ONNX for the rule {step.get('rule')!r}")
    for out, step in outputs.items():
        g.op("Identity", results[step], out=out)
    discrete = space["type"] == "discrete"
    graph = helper.make_graph(
        g.nodes, f"{meta.get('algorithm', 'policy')}-{meta.get('env_id', '')}",
        [helper.make_tensor_value_info("obs", DTYPES[observation["dtype"]],
                                       ["batch", *observation["shape"]])],
        [helper.make_tensor_value_info("action", TensorProto.INT64 if discrete else
                                       TensorProto.FLOAT, ["batch"] if discrete else
                                       ["batch", *space["shape"]]),
         *(helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", None])
           for out in outputs if out != "action")],
        list(g.initializers.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="faasrl", ir_version=IR_VERSION,
                              doc_string="faasrl's acting network; metadata_props say its "
                                         "env, observation and action space")
    helper.set_model_props(model, _metadata(meta))
    return model.SerializeToString()  # onnx's checker passes it (the tests run it): 2x the time
