"""A namespace's jobs quota (oldest first) and its daily spend, decided without a gateway."""

from __future__ import annotations

import asyncio

from faasrl.jobs.admission import SPEND_WINDOW_S, Admission, spend_hold
from faasrl.namespaces import Quota


def test_spend_pauses_at_the_quota_until_enough_of_the_window_ages_out():
    entries = [(100.0, 0.4), (200.0, 0.3), (300.0, 0.3)]
    assert spend_hold("lab-a", entries, 1.5) is None
    hold = spend_hold("lab-a", entries, 0.8)
    assert hold is not None and "spend_usd_per_day=0.8" in hold.reason and "$1.0000" in hold.reason
    assert hold.until == 100.0 + SPEND_WINDOW_S  # 0.6 left once the first is a day old
    assert spend_hold("lab-a", entries, 0.5).until == 200.0 + SPEND_WINDOW_S


def test_jobs_beyond_the_quota_wait_and_start_oldest_first_as_others_leave():
    quotas = {"lab-a": Quota(jobs=1)}

    async def scenario() -> list[str]:
        admission = Admission(lambda ns: quotas.get(ns, Quota()), redis=None)  # type: ignore[arg-type]
        started: list[str] = []
        held: dict[str, str] = {}

        async def run(job: str, created: float) -> None:
            async def hold(why: str) -> None:
                held[job] = why

            await admission.enter(job, "lab-a", created, hold)
            started.append(job)

        await run("first", 1.0)
        later = asyncio.create_task(run("third", 3.0))
        await asyncio.sleep(0)
        second = asyncio.create_task(run("second", 2.0))  # submitted earlier than "third"
        await asyncio.sleep(0.01)
        assert started == ["first"] and "quota jobs=1" in held["second"]
        assert "1 submitted earlier wait too" in held["third"]
        admission.leave("first", "lab-a")
        await asyncio.sleep(0.01)
        assert started == ["first", "second"]
        quotas["lab-a"] = Quota(jobs=3)
        admission.changed()
        await asyncio.gather(later, second)
        return started

    assert asyncio.run(scenario()) == ["first", "second", "third"]
