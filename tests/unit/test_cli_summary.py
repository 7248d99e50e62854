"""The CLI's job summary: the held-out final evaluation is what it reports as the evaluation;
a target confirmation shows on its own line."""

from __future__ import annotations

from faasrl.cli.jobs import _evaluation_lines, _rounds_line


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


def test_the_summary_shows_env_restarts_where_there_were_any():
    job = {"round": 12, "env_steps": 12_288, "wall_s": 3.25, "env_restarts": 0}
    assert _rounds_line(job) == "rounds      12   env steps 12,288   wall 3.2 s"
    assert _rounds_line({**job, "env_restarts": 2}) == \
        "rounds      12   env steps 12,288   env restarts 2   wall 3.2 s"
