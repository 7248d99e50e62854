"""A job's ``model`` section is checked at submit: a network that cannot be built is a 422 naming
``hyperparameters.model.<field>`` (the observations it needs are checked against the env's)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from faasrl.client import SUBMIT_TIMEOUT

PLATFORM = {"register_builtins": True}  # the manager checks the env once functions exist


def job(model: dict[str, Any] | None = None, env_id: str = "CartPole-v1", algorithm: str = "ppo",
        **hyperparameters: Any) -> dict[str, Any]:
    hp = {**hyperparameters, **({"model": model} if model is not None else {})}
    return {"algorithm": algorithm, "env_id": env_id, "hyperparameters": hp,
            "stop": {"max_rounds": 1}}


@pytest.mark.parametrize(("body", "field"), [
    (job({"hidden": []}), "hyperparameters.model.hidden"),
    (job({"hidden": [64, 0]}), "hyperparameters.model.hidden.1"),
    (job({"hidden": "64"}), "hyperparameters.model.hidden"),
    (job({"activation": "swish"}), "hyperparameters.model.activation"),
    (job({"cnn": "resnet"}), "hyperparameters.model.cnn"),
    (job({"depth": 3}), "hyperparameters.model.depth"),
    (job({"cnn": "nature"}), "hyperparameters.model.cnn"),  # CartPole's are 4 floats
    (job({"cnn": "nature"}, algorithm="dqn"), "hyperparameters.model.cnn"),
    (job({"shared_trunk": False}, env_id="ALE/Pong-v5"), "hyperparameters.model.shared_trunk"),
    (job({"cnn": "nature"}, env_id="Pendulum-v1", algorithm="sac"),
     "hyperparameters.model.cnn"),
    (job({"shared_trunk": True}, algorithm="dqn"), "hyperparameters.model.shared_trunk"),
    (job({"log_std_init": -1.0}), "hyperparameters.model.log_std_init"),  # discrete actions
    (job({"log_std_init": -9.0}, env_id="Pendulum-v1"), "hyperparameters.model.log_std_init"),
    (job({"log_std_init": -1.0}, env_id="Pendulum-v1", algorithm="sac"),
     "hyperparameters.model.log_std_init"),  # SAC's actor outputs its own
    ({**job({"cnn": "impala"}, env_id="ALE/Pong-v5"), "controller": {"name": "nitro"}},
     "hyperparameters.model.cnn"),  # no R-operator for its pools
    (job(algorithm="dqn", hidden=0), "hyperparameters.hidden"),  # the one width of before
    (job(hidden=64), "hyperparameters.hidden"),  # PPO never took one
    (job(adam_eps=0), "hyperparameters.adam_eps"),
])
def test_a_network_that_cannot_be_built_is_a_422_naming_the_field(platform, body, field):
    resp = httpx.post(f"{platform.url}/v1/jobs", json=body, timeout=SUBMIT_TIMEOUT)
    assert resp.status_code == 422, resp.text
    assert field in resp.json()["error"]["fields"], resp.json()
