"""Modeled-parallel round time and cost against hand-made records."""

from __future__ import annotations

import random

import pytest

from faasrl.invoker.records import InvocationRecord
from faasrl.jobs.cost import Pricing, actor_cost, learner_cost
from faasrl.jobs.parallel import parallel_cost_usd, parallel_round_s

T0 = 1_000.0  # the round's start, epoch seconds


def _rec(function: str, requested: float, finished: float, *, run: float, wait: float | None = 0.0,
         queue: float = 0.0, init: float = 0.0, cold: bool = False) -> InvocationRecord:
    return InvocationRecord(id=f"{function}{requested}", function=function, status="success",
                            requested_at=T0 + requested, finished_at=T0 + finished, run_s=run,
                            wait_s=wait, queue_s=queue, init_s=init, cold=cold,
                            billed_ms=round((run + (init if cold else 0.0)) * 1000),
                            memory_mb=1024)


def test_a_sync_round_is_the_slowest_uncontended_actor_then_the_learner():
    # Actor a waited 0.9 s of its 2 s for a core; b did not wait. The learner was requested
    # 0.1 s after the last actor finished, and the round closed 0.1 s after the learner.
    records = [_rec("actor", 0.1, 2.1, run=1.9, wait=0.9),
               _rec("actor", 0.1, 1.1, run=1.0),
               _rec("learner", 2.2, 3.2, run=1.0)]
    # a ends at 0.1 + 1.1 = 1.2, b at 1.1; the learner starts at 1.2 + 0.1 and ends at 2.3.
    assert parallel_round_s(records, T0, T0 + 3.3) == pytest.approx(2.4)


def test_nothing_waited_means_the_measured_round():
    records = [_rec("actor", 0.1, 2.1, run=1.9), _rec("learner", 2.2, 3.2, run=1.0)]
    assert parallel_round_s(records, T0, T0 + 3.3) == pytest.approx(3.3)
    unmeasured = [_rec("actor", 0.1, 2.1, run=1.9, wait=None)]  # e.g. on Lambda
    assert parallel_round_s(unmeasured, T0, T0 + 2.2) == pytest.approx(2.2)


def test_queueing_for_capacity_goes_and_a_cold_start_stays():
    # Queued 1.5 s, of which 0.5 s was its container's cold start.
    records = [_rec("actor", 0.0, 2.5, run=1.0, queue=1.5, init=0.5, cold=True)]
    assert parallel_round_s(records, T0, T0 + 2.5) == pytest.approx(1.5)


def test_work_started_in_the_round_before_counts_from_the_round_start():
    # Half of its 2 s span fell in this round: half of its 1 s saving counts.
    records = [_rec("actor", -1.0, 1.0, run=2.0, wait=1.0),
               _rec("learner", 1.0, 2.0, run=1.0)]
    assert parallel_round_s(records, T0, T0 + 2.0) == pytest.approx(1.5)


def test_work_that_ended_before_the_round_adds_nothing():
    # An asynchronous round trains on a batch rolled out during the round before: its actor
    # ended 3 s before this round began. Counting it stretched every later invocation by the
    # part of its saving that fell outside the round (an async Hopper job modeled 1.4x its
    # measured wall).
    records = [_rec("actor", -5.0, -3.0, run=2.0, wait=1.5),
               _rec("learner", 0.5, 1.5, run=1.0)]
    assert parallel_round_s(records, T0, T0 + 2.0) == pytest.approx(2.0)


def test_the_model_is_never_longer_than_the_measured_round():
    rng = random.Random(0)
    for _ in range(500):
        records = []
        for _ in range(rng.randint(1, 12)):
            requested = rng.uniform(-6.0, 5.0)
            finished = requested + rng.uniform(0.01, 4.0)
            run = rng.uniform(0.0, finished - requested)
            records.append(_rec("actor", requested, finished, run=run,
                                wait=rng.uniform(0.0, run), queue=rng.uniform(0.0, 0.5)))
        end = max(0.1, *(r.finished_at - T0 for r in records)) + rng.uniform(0.0, 0.5)
        assert parallel_round_s(records, T0, T0 + end) <= end + 1e-9


def test_an_invocation_requested_before_another_finished_does_not_wait_for_it():
    # The second actor was requested while the first still ran (no dependency): the round is
    # the later of the two modeled ends, not their sum.
    records = [_rec("actor", 0.0, 3.0, run=3.0, wait=2.0), _rec("actor", 0.5, 1.5, run=1.0)]
    assert parallel_round_s(records, T0, T0 + 3.0) == pytest.approx(1.5)


def test_the_modeled_cost_bills_the_uncontended_runs_at_the_measured_prices():
    pricing = Pricing()
    records = [_rec("actor", 0.1, 2.1, run=1.9, wait=0.9), _rec("learner", 2.2, 3.2, run=1.0)]
    measured = actor_cost(records[:1], pricing) + learner_cost(records[1:], pricing)
    modeled = parallel_cost_usd(records, "actor", pricing)
    actor_saving = 0.9 * 1024 / 1024 * pricing.lambda_gb_s
    assert modeled == pytest.approx(measured - actor_saving)
    no_wait = [_rec("actor", 0.1, 2.1, run=1.9), _rec("learner", 2.2, 3.2, run=1.0)]
    assert parallel_cost_usd(no_wait, "actor", pricing) == pytest.approx(
        actor_cost(no_wait[:1], pricing) + learner_cost(no_wait[1:], pricing))
