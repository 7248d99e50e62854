"""The CLI's job summary and progress: the held-out final evaluation is what it reports as the
evaluation, a target confirmation shows on its own line, and the progress bar runs toward the
bound that will end the job."""

from __future__ import annotations

from faasrl.cli.jobs import _evaluation_lines, _rounds_line, nearest_bound


def _evaluation(mean: float, version: int = 7) -> dict[str, object]:
    return {"version": version, "episodes": 20, "first_seed": 2**52, "mean": mean, "std": 1.5,
            "min": mean - 2, "max": mean + 2, "returns": [mean] * 20}


def test_the_summary_reports_the_held_out_evaluation_and_the_confirmation_apart():
    lines = _evaluation_lines({"confirmation": _evaluation(494.2),
                               "evaluation": _evaluation(462.5)})
    assert lines == ["confirmation mean 494.2 over 20 episodes (version 7)",
                     "evaluation  held-out: mean 462.5 ± 1.5 over 20 episodes (min 460, max 464)"]


def test_a_job_that_evaluates_nothing_shows_no_evaluation():
    assert _evaluation_lines({"confirmation": None, "evaluation": None}) == []
    assert len(_evaluation_lines({"evaluation": _evaluation(9.0)})) == 1


def test_the_progress_bar_runs_toward_the_bound_the_job_is_nearest_to():
    row = {"round": 9, "total_env_steps": 40_000, "cost_total": 0.05, "wall_s": 30.0}
    rounds_and_steps = {"max_rounds": 500, "max_env_steps": 50_000}
    assert nearest_bound(rounds_and_steps, row) == (0.8, "40,000/50,000 env steps")
    assert nearest_bound({"max_rounds": 20, "budget_usd": 1.0}, row) == (0.5, "10/20 rounds")
    assert nearest_bound({"budget_usd": 0.04}, row) == (1.0, "$0.0500/$0.0400")
    assert nearest_bound({"max_wall_s": 60.0}, row) == (0.5, "30/60 s")
    assert nearest_bound({"target_reward": 475.0}, row) == (None, "10 rounds")


def test_the_summary_shows_env_restarts_where_there_were_any():
    job = {"round": 12, "env_steps": 12_288, "wall_s": 3.25, "env_restarts": 0}
    assert _rounds_line(job) == "rounds      12   env steps 12,288   wall 3.2 s"
    assert _rounds_line({**job, "env_restarts": 2}) == \
        "rounds      12   env steps 12,288   env restarts 2   wall 3.2 s"
