"""TensorBoard event files of a job's metrics rows: one scalar per numeric column
(:mod:`faasrl.jobs.scalars`), step = the job's env steps.

Written with tensorboard's own event-file writer and ``simple_value`` summaries, which every
reader takes (TensorBoard, its ``EventAccumulator``, tbparse); it needs no torch, so the gateway
can write a job's log as its rows arrive. Import this module only where event files are
written: tensorboard takes most of a second to import.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from faasrl.jobs.scalars import row_scalars, row_step

FOLDER = "tensorboard"  # a job's event files, under its folder in the state dir


class EventLog:
    """One event file in ``folder`` (a new one per log: TensorBoard merges a folder's files)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._writer = EventFileWriter(str(folder))

    def start_after(self, step: int, wall_time: float) -> None:
        """Mark where this run of the job starts: its state is that of ``step`` env steps, so
        what an earlier log holds beyond them (rounds a crash lost, which this run plays
        again) is hidden. TensorBoard's readers drop the points at or after a session start's
        step that earlier files hold."""
        self._writer.add_event(Event(wall_time=wall_time, step=step + 1,
                                     session_log=SessionLog(status=SessionLog.START)))
        self._writer.flush()

    def add_row(self, row: dict[str, Any], wall_time: float, *, flush: bool = True) -> None:
        """Write a row's scalars and flush, so a TensorBoard watching the folder sees the
        round now, not when a buffer fills (an export of finished rows flushes once, at
        ``close``)."""
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)
                                 for tag, value in row_scalars(row).items()])
        self._writer.add_event(Event(wall_time=wall_time, step=row_step(row), summary=summary))
        if flush:
            self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def export_rows(rows: Iterable[dict[str, Any]], folder: Path, started_at: float) -> int:
    """Write finished rows as one event file in ``folder``; a row's wall time is the job's
    start plus its ``wall_s``. Returns the number of rows written."""
    log, n = EventLog(folder), 0
    try:
        for row in rows:
            log.add_row(row, started_at + float(row.get("wall_s") or 0.0), flush=False)
            n += 1
    finally:
        log.close()
    return n
