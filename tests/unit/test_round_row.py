"""The metrics row's one owner: every column named once, rows stored as before, v2 names."""

from __future__ import annotations

from dataclasses import fields

import pytest

from faasrl import round_row as rr
from faasrl.controllers.base import BUDGET_READS
from faasrl.controllers.minions import STATE_READS

# The stored row's first and last columns, in the order every row has had them (the CSV's
# header keeps it): the workflow's columns and the costs come in between.
HEAD = ["round", "actors", "version", "env_steps", "total_env_steps", "episodes",
        "mean_return", "max_return", "recent_mean_return", "round_s", "parallel_round_s",
        "actor_s_max", "actor_s_mean", "cold_starts", "env_restarts", "env_backend",
        "queue_s_max", "queue_s", "actor_s", "share", "paused_s", "controller", "controller_s"]
TAIL = ["cost_round", "cost_total", "serverful_cost_total", "parallel_cost_round",
        "parallel_cost_total", "wall_s", "parallel_wall_s"]


def a_row(**columns: object) -> rr.RoundRow:
    values = {f.name: 0 for f in fields(rr.RoundRow)}
    return rr.RoundRow(**{**values, "columns": columns,
                          "costs": {rr.COST_ACTORS: 1.0, rr.COST_LEARNER: 2.0}})


def test_the_stored_row_keeps_its_names_and_order() -> None:
    row = a_row(**{rr.LEARNER_S: 0.5, "pg_loss": 0.1}).flat()
    assert list(row) == [*HEAD, "learner_s", "pg_loss", "cost_actors", "cost_learner", *TAIL]


def test_every_field_of_the_row_is_a_named_column() -> None:
    names = [f.name for f in fields(rr.RoundRow) if f.name not in ("columns", "costs")]
    assert names == [*HEAD, *TAIL]
    assert set(names) <= set(rr.COLUMNS)


def test_v2_names_group_the_columns_and_never_collide() -> None:
    row = rr.namespaced(a_row(**{rr.STALENESS_MEAN: 1.5, "q_loss": 0.2}).flat())
    assert row["round"] == 0 and row["workflow/staleness_mean"] == 1.5
    assert row["algo/q_loss"] == 0.2 and row["cost/cost_actors"] == 1.0
    assert row["controller/controller"] == 0
    spelled = [c.namespaced for c in rr.COLUMNS.values()]
    assert len(spelled) == len(set(spelled)) == len(rr.COLUMNS)


def test_a_column_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'round' named twice"):
        rr._column("round", rr.Group.COMMON, "again")


def test_the_controllers_declare_what_they_read() -> None:
    from faasrl.controllers.kungfu import KungFu
    from faasrl.controllers.minions import Minions, MinionsAdapt
    from faasrl.controllers.nitro import Nitro
    assert set(STATE_READS) | set(BUDGET_READS) <= set(rr.COLUMNS)
    assert Minions.READS == STATE_READS and rr.LOSS in Minions.READS
    assert MinionsAdapt.READS == (rr.MEAN_RETURN,) and KungFu.READS == (rr.GNS,)
    assert rr.HESSIAN_RATIO in Nitro.READS and set(BUDGET_READS) <= set(Nitro.READS)
