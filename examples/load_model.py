"""Play a faasrl model file with plain torch, safetensors and gymnasium (no faasrl needed).

    python examples/load_model.py model.safetensors   # from: faasrl jobs export JOB --model

Works for every algorithm's file (PPO, IMPACT/Stellaris, DQN, SAC) and every network a job's
``model`` section asks for: its metadata says all that is used here: ``architecture.forward``
(steps of layers and combination rules, in order), ``observation`` (the input formula),
``action_space`` and ``env``; ``architecture.network`` sums the network up (widths,
activation, CNN, shared trunk, dueling).
"""

import importlib
import json
import sys

import gymnasium as gym
import numpy as np
import torch
from safetensors import safe_open

LAYERS = {"linear": lambda s: torch.nn.Linear(s["in"], s["out"]),
          "conv2d": lambda s: torch.nn.Conv2d(s["in"], s["out"], s["kernel"], s["stride"],
                                              s["padding"]),
          "tanh": lambda s: torch.nn.Tanh(), "relu": lambda s: torch.nn.ReLU(),
          "elu": lambda s: torch.nn.ELU(), "gelu": lambda s: torch.nn.GELU(),
          "silu": lambda s: torch.nn.SiLU(), "leaky_relu": lambda s: torch.nn.LeakyReLU(),
          "flatten": lambda s: torch.nn.Flatten(),
          "maxpool2d": lambda s: torch.nn.MaxPool2d(s["kernel"], s["stride"], s["padding"])}
RULES = {"argmax": lambda x, step, b: x[0].argmax(-1),
         "clip": lambda x, step, b: x[0].clamp(b["low"], b["high"]),
         "first": lambda x, step, b: x[0][..., :step["n"]],
         "tanh": lambda x, step, b: x[0].tanh(),
         "to_bounds": lambda x, step, b: (b["high"] + b["low"]) / 2
         + (b["high"] - b["low"]) / 2 * x[0],
         "dueling": lambda x, step, b: x[0] + x[1] - x[1].mean(-1, keepdim=True)}


class Residual(torch.nn.Module):
    """x + block(x) (the IMPALA CNN's residual blocks)."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return x + self.block(x)


def load_model(path):
    """(forward, meta): forward(obs) maps one raw observation to every step's output; its
    ``action`` is the policy's deterministic action."""
    with safe_open(path, "pt") as f:
        meta = {k: json.loads(v) if v[:1] in "[{" else v for k, v in f.metadata().items()}
        w = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    steps, obs_in = meta["architecture"]["forward"], meta["observation"]
    bounds = {k: torch.tensor(v) for k, v in meta["action_space"].items() if k in ("low", "high")}
    norm = obs_in.get("normalization")

    def net(layers):
        modules = []
        for x in layers:
            module = Residual(net(x["layers"])) if x["op"] == "residual" else LAYERS[x["op"]](x)
            if "weight" in x:
                module.load_state_dict({"weight": w[x["weight"]], "bias": w[x["bias"]]})
            modules.append(module)
        return torch.nn.Sequential(*modules)

    nets = {s["name"]: net(s["layers"]) for s in steps if "layers" in s}

    @torch.no_grad()
    def forward(obs):
        x = torch.as_tensor(np.asarray(obs, dtype=obs_in["dtype"]))[None]
        if norm:
            x = (x.double() - w[norm["mean"]]) / (w[norm["var"]] + norm["eps"]).sqrt()
            x = x.clamp(-norm["clip"], norm["clip"]).float()
        else:
            x = x.float() / obs_in["divide_by"]
        out = {"obs": x}
        for s in steps:
            ins = [out[name] for name in s["of"]]
            out[s["name"]] = nets[s["name"]](torch.cat(ins, -1)) if "layers" in s \
                else RULES[s["rule"]](ins, s, bounds)
        return {k: v[0] for k, v in out.items()}

    return forward, meta


def load_policy(path):
    """(act, meta): act(obs) is the deterministic action for one raw observation."""
    forward, meta = load_model(path)
    discrete = meta["action_space"]["type"] == "discrete"

    def act(obs):
        action = forward(obs)["action"]
        return int(action) if discrete else action.numpy()

    return act, meta


def make_env(env):
    """The env as the policy saw it in training, from the file's ``env``. An env brought as
    code (``env["code"]``) needs its modules importable (its folder on PYTHONPATH)."""
    code = env.get("code")
    if code is None:
        if env["id"].startswith("ALE/"):
            import ale_py

            gym.register_envs(ale_py)
        e = gym.make(env["id"], **env["make_kwargs"])
    else:
        for module in code["imports"]:
            importlib.import_module(module)
        if code["entry_point"] is None:
            e = gym.make(env["id"], max_episode_steps=code["max_episode_steps"], **code["kwargs"])
        else:
            module, _, attr = code["entry_point"].partition(":")
            make = importlib.import_module(module)
            for part in attr.split("."):
                make = getattr(make, part)
            e = make(**code["kwargs"])
            if code["max_episode_steps"] is not None:
                e = gym.wrappers.TimeLimit(e, code["max_episode_steps"])
    for wrapper in env["wrappers"]:
        if wrapper["name"] == "TransposeObservation":  # faasrl's: numpy.transpose(obs, axes)
            axes, space = wrapper["kwargs"]["axes"], e.observation_space
            box = gym.spaces.Box(np.transpose(space.low, axes), np.transpose(space.high, axes),
                                 dtype=space.dtype)
            e = gym.wrappers.TransformObservation(
                e, lambda o, a=axes: np.ascontiguousarray(np.transpose(o, a)), box)
        else:
            e = getattr(gym.wrappers, wrapper["name"])(e, **wrapper["kwargs"])
    return e


if __name__ == "__main__":
    act, meta = load_policy(sys.argv[1])
    env = make_env(meta["env"])
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total, done = total + float(reward), terminated or truncated
    print(f"{meta['algorithm']} on {meta['env_id']}: return {total:g}")
