"""A metrics row as scalars, and the TensorBoard log that writes them as rows arrive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from faasrl.jobs.prometheus import GAUGES
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


def test_the_gateway_writes_event_files_and_job_gauges_without_torch(tmp_path: Path):
    """The platform image has no torch: the TensorBoard log and the job gauges must not need it."""
    code = f"""if True:
        import sys
        sys.modules["torch"] = None  # importing it now raises ModuleNotFoundError
        from pathlib import Path
        from faasrl.jobs.prometheus import JobCollector
        from faasrl.jobs.tensorboard import export_rows
        print(export_rows([{{"total_env_steps": 1, "mean_return": 2.0}}], Path({str(tmp_path)!r}),
                          0.0))
        print(len(list(JobCollector(list).collect())))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", str(1 + len(GAUGES))]  # faasrl_job_info and each gauge
    assert list(tmp_path.glob("events.out.tfevents.*"))
