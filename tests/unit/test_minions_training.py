"""Training a MinionsRL scheduler on the simulated workload: it learns, in seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from faasrl.controllers.fixed import Fixed
from faasrl.controllers.minions import OUTPUT_BIAS, SchedulerPolicy, scheduler_i_max
from faasrl.scheduler_training.train import (
    Episode,
    SchedulerTrainer,
    TrainingConfig,
    episode_rewards,
    evaluate_on_workload,
    from_numpy,
    new_scheduler,
    simulated_episodes,
    to_numpy,
)
from faasrl.scheduler_training.workload import SimulatedWorkload


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reproducible updates, and fast on tiny networks
    yield
    torch.set_num_threads(threads)


def test_simulated_workload_has_an_interior_optimum():
    workload = SimulatedWorkload()
    times = {n: sum(r["round_s"] for r in workload.run(Fixed(n), seed=1)[0])
             for n in (1, 3, 32)}
    assert times[3] < times[1] and times[3] < times[32]
    rows, reached = workload.run(Fixed(3), seed=1)
    assert reached and rows[-1]["mean_return"] >= workload.target
    assert rows[-1]["cost_total"] == pytest.approx(sum(r["cost_round"] for r in rows))


def test_the_output_layer_named_once_is_the_trained_networks_last():
    """The numpy scheduler and the job submit's check read the layer training saves."""
    model = new_scheduler(5, seed=0)
    weights = to_numpy(model)
    assert [k for k in weights if k.startswith("actor.")][-1] == OUTPUT_BIAS
    assert scheduler_i_max(weights) == SchedulerPolicy(weights).i_max == 5
    assert torch.equal(from_numpy(weights).state_dict()[OUTPUT_BIAS],
                       model.state_dict()[OUTPUT_BIAS])


def test_episode_rewards_add_the_terminal_penalty_to_the_last_round():
    rows = [{"round_s": 2.0, "cost_round": 0.0, "mean_return": 20.0},
            {"round_s": 1.0, "cost_round": 0.0, "mean_return": 60.0}]
    cfg = TrainingConfig(beta=0.1)
    assert episode_rewards(Episode(rows, False, 100.0), cfg) == \
        pytest.approx([-0.2, -0.1 - 0.4])
    assert episode_rewards(Episode(rows, True, 100.0), cfg) == pytest.approx([-0.2, -0.1])


def test_scheduler_learns_to_finish_the_simulated_job_faster():
    workload = SimulatedWorkload()
    cfg = TrainingConfig(i_max=32, beta=0.1, seed=0)
    trainer = SchedulerTrainer(cfg)
    seeds = list(range(1000, 1010))
    before = evaluate_on_workload(trainer.weights(), workload, seeds, cfg)
    trainer.train(simulated_episodes(workload, seed=0), 200)
    after = evaluate_on_workload(trainer.weights(), workload, seeds, cfg)
    extremes = min(evaluate_on_workload_fixed(workload, n, seeds) for n in (1, 16, 32))
    assert after["time_s"] < 0.75 * before["time_s"], (before, after)
    assert after["time_s"] < 0.9 * extremes, (after, extremes)  # it found the middle
    assert after["return"] > before["return"]
    assert len(trainer.returns) == 200 and trainer.meta()["episodes"] == 200


def evaluate_on_workload_fixed(workload: SimulatedWorkload, n: int, seeds: list[int]) -> float:
    return sum(sum(r["round_s"] for r in workload.run(Fixed(n), s)[0]) for s in seeds) / len(seeds)
