"""A gateway's shutdown ends even when one of its steps never would."""

import asyncio
import logging
import time

import pytest

from faasrl.gateway import app


def test_a_stuck_shutdown_step_is_cancelled_and_logged_with_the_tasks(monkeypatch, caplog):
    monkeypatch.setattr(app, "SHUTDOWN_STEP_S", 0.2)
    cancelled = []

    async def never_done() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def shutdown() -> float:
        stuck = asyncio.create_task(never_done(), name="stuck-driver")
        t0 = time.monotonic()
        await app._step("job drivers", asyncio.gather(stuck))
        return time.monotonic() - t0

    with caplog.at_level(logging.ERROR, logger=app.log.name):
        took = asyncio.run(shutdown())
    assert took == pytest.approx(0.2, abs=0.15)
    assert cancelled == [True]
    assert "job drivers did not finish within 0.2 s" in caplog.text
    assert "never_done" in caplog.text  # the stack says what it waited on


def test_a_step_that_finishes_logs_nothing(monkeypatch, caplog):
    monkeypatch.setattr(app, "SHUTDOWN_STEP_S", 5.0)
    with caplog.at_level(logging.ERROR, logger=app.log.name):
        asyncio.run(app._step("containers", asyncio.sleep(0.01)))
    assert caplog.text == ""
