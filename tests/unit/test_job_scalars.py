"""A metrics row as scalars, and the TensorBoard log that writes them as rows arrive."""

from __future__ import annotations

from pathlib import Path

from faasrl.jobs.scalars import row_scalars, row_step


def test_numbers_become_scalars_mappings_are_flattened_the_rest_is_left_out():
    row = {"round": 3, "total_env_steps": 512, "mean_return": 21.5, "max_return": None,
           "controller": {"score": 0.25, "action": 2, "reason": "text", "ok": True},
           "rejected_reasons": ["x"], "actor_error": "boom", "skipped": False}
    assert row_scalars(row) == {"round": 3.0, "total_env_steps": 512.0, "mean_return": 21.5,
                                "controller/score": 0.25, "controller/action": 2.0}
    assert row_step(row) == 512


def test_the_event_log_is_readable_after_each_row_before_it_is_closed(tmp_path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from faasrl.jobs.tensorboard import EventLog

    log = EventLog(tmp_path / "tb")
    try:
        for i in range(2):
            log.add_row({"total_env_steps": 100 * (i + 1), "mean_return": float(i)},
                        wall_time=1000.0 + i)
            acc = EventAccumulator(str(tmp_path / "tb"))
            acc.Reload()
            assert [(e.step, e.value, e.wall_time) for e in acc.Scalars("mean_return")] == \
                [(100 * (j + 1), float(j), 1000.0 + j) for j in range(i + 1)]
    finally:
        log.close()
