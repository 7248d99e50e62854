"""The guide's worked example (docs/functions.md): examples/custom-actor deployed from its folder
as a user would, and a job whose rollouts all run in it, on the process backend."""

from __future__ import annotations

from helpers import REPO, succeeded

from faasrl.client import Client
from faasrl.jobs.spec import JobSpec
from faasrl.user_input import load_yaml

EXAMPLE = REPO / "examples" / "custom-actor"
PLATFORM = {"register_builtins": True}  # the built-in learner trains on the custom batches


def test_the_example_job_names_the_example_function():
    spec = JobSpec.model_validate(load_yaml((EXAMPLE / "job.yaml").read_text()))
    assert spec.actor_function == load_yaml((EXAMPLE / "manifest.yaml").read_text())["name"]


def test_a_job_runs_its_rollouts_in_the_deployed_custom_actor(client: Client):
    deployed = client.deploy(EXAMPLE)  # what `faasrl functions deploy` does: code uploaded
    assert deployed["name"] == "scaled-actor" and deployed["env"] == {"REWARD_SCALE": "0.1"}
    job = load_yaml((EXAMPLE / "job.yaml").read_text())
    job.update(envs_per_actor=2, steps_per_actor=64, evaluation_episodes=2,
               stop={"max_rounds": 3})
    done = succeeded(client, client.submit(job)["id"])
    assert (done["round"], done["env_steps"]) == (3, 3 * 2 * 2 * 64)
    assert done["evaluation"]["episodes"] == 2
    rollouts = [r for r in client.invocations("scaled-actor", limit=100)
                if r["status"] == "success"]
    assert len(rollouts) >= 3 * 2  # every round's two actors, and the final evaluation
    assert client.invocations("actor") == []  # the built-in actor ran nothing
    rows = client.job_metrics(done["id"])
    # Returns are the env's own (a CartPole episode is 8 steps or more), not scaled by 0.1.
    assert all(row["mean_return"] >= 8 for row in rows if row["mean_return"] is not None)
    assert all(row["samples"] == 2 * 2 * 64 and row["rejected"] == 0 for row in rows)
