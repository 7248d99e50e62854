"""The virtual clock releases starts and ends in virtual order, whatever the real order."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from faasrl import round_row as rr
from faasrl.invoker import InvocationRecord
from faasrl.jobs.clock import Calibration, counts_units, hessian_units, units
from faasrl.workflow.virtual_clock import Event, Outcome, VirtualClock, VirtualExecutor
from faasrl.workflow.virtual_job import attempts_duration, virtual_view

Log = list[tuple[str, str, float, float]]  # (kind, key, time, start)


def drain(clock: VirtualClock[str]) -> Log:
    """Every event releasable now, as (kind, key, time, start)."""
    out: Log = []
    while (e := clock.next_event()) is not None:
        out.append((e.kind, e.key, e.time, e.start))
    return out


def ends(log: Log) -> list[tuple[str, float]]:
    return [(key, time) for kind, key, time, _ in log if kind == "end"]


def test_an_invocation_that_ends_later_in_real_time_but_earlier_in_virtual_time_comes_first():
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("slow-virtual", "actor")
    clock.submit("fast-virtual", "actor")
    assert [k for _, k, _, _ in drain(clock)] == ["slow-virtual", "fast-virtual"]  # both start
    clock.complete("slow-virtual", 5.0)  # its real run came back first
    assert drain(clock) == []  # fast-virtual, still running, could end before 5
    clock.complete("fast-virtual", 1.0)
    assert ends(drain(clock)) == [("fast-virtual", 1.0), ("slow-virtual", 5.0)]


@pytest.mark.parametrize(("bound", "released"), [(0.0, False), (0.5, False), (1.0, False),
                                                 (1.5, True)])
def test_nothing_is_released_while_a_running_invocation_could_still_end_earlier(bound, released):
    """B ends at 1; A, started at 0 and still running, cannot end before 0 + bound. At bound 1
    A could end at exactly 1 and, submitted first, would come first."""
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("A", "learner", lower_bound=bound)
    clock.submit("B", "learner")
    drain(clock)
    clock.complete("B", 1.0)
    assert ends(drain(clock)) == ([("B", 1.0)] if released else [])


def test_at_one_instant_the_invocation_submitted_first_ends_first():
    """B (submitted first) ends at 1; A, still running, could end at 1 at the earliest: B's
    end is certain, since A's could only come after it."""
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("B", "learner")
    clock.submit("A", "learner", lower_bound=1.0)
    drain(clock)
    clock.complete("B", 1.0)
    assert ends(drain(clock)) == [("B", 1.0)]
    clock.complete("A", 1.0)
    assert ends(drain(clock)) == [("A", 1.0)]


def test_a_lower_bound_lets_later_work_through_while_a_long_invocation_runs():
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("long", "learner", lower_bound=10.0)
    clock.submit("a1", "actor")
    drain(clock)
    clock.complete("a1", 1.0)
    assert ends(drain(clock)) == [("a1", 1.0)]
    clock.submit("a2", "actor")  # what the workflow does on a1's end: at the virtual now, 1
    assert drain(clock) == [("start", "a2", 1.0, 1.0)]
    clock.complete("a2", 2.0)
    assert ends(drain(clock)) == [("a2", 3.0)]
    clock.complete("long", 12.0)
    assert ends(drain(clock)) == [("long", 12.0)]


def test_one_virtual_core_serialises():
    clock: VirtualClock[str] = VirtualClock(cores=1)
    durations = {"a": 0.5, "b": 2.0, "c": 0.25, "d": 1.0}
    for key in durations:
        clock.submit(key, "actor")
    log: Log = []
    while not clock.idle:
        step = drain(clock)
        assert clock.running() <= 1
        for kind, key, _, _ in step:
            if kind == "start":
                clock.complete(key, durations[key])
        log += step
    starts = [(k, t) for kind, k, t, _ in log if kind == "start"]
    assert [k for k, _ in starts] == list(durations)
    assert [t for _, t in starts] == [0.0, 0.5, 2.5, 2.75]  # each start: the previous end
    assert ends(log)[-1] == ("d", 3.75)


def test_n_cores_run_n_at_once_and_the_rest_queue_for_a_free_core():
    clock: VirtualClock[str] = VirtualClock(cores=3)
    for key in "abcde":
        clock.submit(key, "actor")
    first = drain(clock)
    assert [(k, t) for _, k, t, _ in first] == [("a", 0.0), ("b", 0.0), ("c", 0.0)]
    assert clock.running() == 3
    clock.complete("b", 1.0)
    clock.complete("c", 2.0)
    assert drain(clock) == []  # a, running, could still end first
    clock.complete("a", 3.0)
    log = drain(clock)
    assert log == [("end", "b", 1.0, 0.0), ("start", "d", 1.0, 1.0)]  # d could end before 2
    clock.complete("d", 5.0)
    assert drain(clock) == [("end", "c", 2.0, 0.0), ("start", "e", 2.0, 2.0)]
    clock.complete("e", 0.5)
    assert drain(clock) == [("end", "e", 2.5, 2.0), ("end", "a", 3.0, 0.0),
                            ("end", "d", 6.0, 1.0)]


def test_waiting_invocations_start_in_ready_time_then_submission_order():
    clock: VirtualClock[str] = VirtualClock(cores=1)
    clock.submit("busy", "actor")
    clock.submit("late", "actor", ready_at=0.5)
    clock.submit("x", "actor")
    clock.submit("y", "actor")
    drain(clock)
    clock.complete("busy", 1.0)
    assert drain(clock)[1] == ("start", "x", 1.0, 1.0)
    clock.complete("x", 1.0)
    assert drain(clock)[1] == ("start", "y", 2.0, 2.0)  # y was ready at 0, late at 0.5
    clock.complete("y", 1.0)
    assert drain(clock)[1] == ("start", "late", 3.0, 3.0)


def test_an_invocation_ready_later_starts_at_its_ready_time_on_a_free_core():
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("now", "actor")
    clock.submit("later", "actor", ready_at=4.0)
    assert drain(clock) == [("start", "now", 0.0, 0.0)]  # later's start waits for now's end
    clock.complete("now", 1.0)
    assert drain(clock) == [("end", "now", 1.0, 0.0), ("start", "later", 4.0, 4.0)]


def test_a_function_at_its_concurrency_cap_does_not_hold_up_others():
    clock: VirtualClock[str] = VirtualClock(cores=4, concurrency={"learner": 1})
    clock.submit("l1", "learner")
    clock.submit("l2", "learner")
    clock.submit("a1", "actor")
    assert [k for _, k, _, _ in drain(clock)] == ["l1", "a1"]
    clock.complete("a1", 0.5)
    clock.complete("l1", 2.0)
    assert drain(clock)[-1] == ("start", "l2", 2.0, 2.0)


def test_a_zero_core_timer_fires_at_its_time_while_every_core_is_busy():
    clock: VirtualClock[str] = VirtualClock(cores=1, )
    clock.submit("busy", "actor", lower_bound=5.0)
    clock.submit("timer", "timer", ready_at=3.0, cores=0)
    assert drain(clock) == [("start", "busy", 0.0, 0.0), ("start", "timer", 3.0, 3.0)]
    clock.complete("timer", 0.0)
    assert drain(clock) == [("end", "timer", 3.0, 3.0)]


def test_a_cancelled_invocation_is_never_released_and_frees_its_core_at_the_virtual_now():
    clock: VirtualClock[str] = VirtualClock(cores=1)
    clock.submit("a", "actor")
    clock.submit("b", "actor")
    clock.submit("c", "actor")
    drain(clock)
    clock.complete("a", 1.0)
    assert ends(drain(clock)) == [("a", 1.0)]  # b starts at 1
    clock.complete("b", 3.0)  # its end (4) known but not yet released when cancelled at 1
    clock.cancel("c")  # waiting: removed
    clock.submit("d", "actor")
    clock.cancel("b")  # running: its core is free from now (1)
    assert drain(clock) == [("start", "d", 1.0, 1.0)]
    clock.complete("d", 1.0)
    assert drain(clock) == [("end", "d", 2.0, 1.0)]
    assert clock.idle
    with pytest.raises(ValueError, match="unknown"):
        clock.cancel("b")


def test_misuse_is_refused():
    clock: VirtualClock[str] = VirtualClock(cores=2)
    clock.submit("a", "actor", lower_bound=1.0)
    with pytest.raises(ValueError, match="not running"):
        clock.complete("a", 1.0)
    with pytest.raises(ValueError, match="twice"):
        clock.submit("a", "actor")
    with pytest.raises(ValueError, match="needs 3 cores"):
        clock.submit("wide", "actor", cores=3)
    drain(clock)
    with pytest.raises(ValueError, match="below its lower bound"):
        clock.complete("a", 0.5)
    clock.complete("a", 1.0)
    drain(clock)
    with pytest.raises(ValueError, match="before the virtual now"):
        clock.submit("b", "actor", ready_at=0.5)
    with pytest.raises(ValueError, match="concurrency"):
        VirtualClock(cores=2, concurrency={"learner": 0})


# ------------------------------------------------------------- determinism, property-style
def duration_of(key: str) -> float:
    """A deterministic virtual duration (what a calibration gives): quarters, so ties occur."""
    return (sum(map(ord, key)) % 7 + 1) / 4


def bound_of(key: str) -> float:
    return duration_of(key) * (sum(map(ord, key)) % 3) / 2


def simulate(cores: int, pick: Callable[[list[str]], str] | None) -> Log:
    """An asynchronous workflow in miniature: 5 actors each sample again on their end until 30
    rollouts; every 2 rollouts a learner (cap 2). ``pick`` chooses which running invocation's
    real run comes back next (None: each comes back at once, the sequential reference)."""
    clock: VirtualClock[str] = VirtualClock(cores=cores, concurrency={"learner": 2})
    rollouts, rolled_out, learners, log = 0, 0, 0, []
    in_flight: list[str] = []

    def submit(key: str, function: str) -> None:
        clock.submit(key, function, lower_bound=bound_of(key))

    for slot in range(5):
        submit(f"actor-{slot}-{rollouts}", "actor")
        rollouts += 1
    while not clock.idle:
        while (e := clock.next_event()) is not None:
            log.append((e.kind, e.key, e.time, e.start))
            if e.kind == "start":
                if pick is None:
                    clock.complete(e.key, duration_of(e.key))
                else:
                    in_flight.append(e.key)
            elif e.function == "actor":
                rolled_out += 1
                if rolled_out % 2 == 0:
                    submit(f"learner-{learners}", "learner")
                    learners += 1
                if rollouts < 30:
                    submit(f"actor-{e.key.split('-')[1]}-{rollouts}", "actor")
                    rollouts += 1
        if in_flight:
            key = pick(in_flight)
            in_flight.remove(key)
            clock.complete(key, duration_of(key))
    return log


@pytest.mark.parametrize("cores", [1, 3, 16])
def test_release_order_and_virtual_times_do_not_depend_on_the_real_order(cores):
    reference = simulate(cores, None)
    assert len([e for e in reference if e[0] == "end"]) == 30 + 15
    times = [t for _, _, t, _ in reference]
    assert times == sorted(times)
    rng = random.Random(35)
    for _ in range(25):
        assert simulate(cores, rng.choice) == reference
    assert simulate(cores, lambda keys: keys[-1]) == reference  # newest first
    assert simulate(cores, lambda keys: keys[0]) == reference  # oldest first


def test_more_virtual_cores_run_more_at_once_and_end_sooner():
    peak = {}
    for cores in (1, 3, 16):
        log, running, most = simulate(cores, None), 0, 0
        for kind, *_ in log:
            running += 1 if kind == "start" else -1
            most = max(most, running)
        peak[cores] = (most, log[-1][2])
    assert peak[1][0] == 1 and peak[3][0] == 3 and peak[16][0] > 3
    assert peak[1][1] > peak[3][1] > peak[16][1]


# ------------------------------------------------------------------------ the asyncio side
def run_executor(cores: int, plan: dict[str, tuple[float, float]],
                 fail: frozenset[str] = frozenset()) -> list[Outcome[str]]:
    """Run ``plan`` (key -> (real seconds, virtual duration)) through a VirtualExecutor;
    returns the ends in the order it hands them over."""

    async def main() -> list[Outcome[str]]:
        executor: VirtualExecutor[str] = VirtualExecutor(
            VirtualClock(cores=cores), lambda start, result: plan[result][1])
        for key, (real_s, _) in plan.items():
            async def work(key: str = key, real_s: float = real_s) -> str:
                await asyncio.sleep(real_s)
                if key in fail:
                    raise RuntimeError(f"{key} failed")
                return key
            executor.submit(key, "actor", work, lower_bound=0.1)
        out = []
        while (o := await executor.next()) is not None:
            out.append(o)
        return out

    return asyncio.run(main())


def test_the_executor_hands_over_ends_in_virtual_order_not_real_order():
    out = run_executor(2, {"a": (0.2, 1.0), "b": (0.0, 3.0), "c": (0.0, 0.5)})
    assert [(o.event.key, o.event.time) for o in out] == [("a", 1.0), ("c", 1.5), ("b", 3.0)]
    assert [o.result for o in out] == ["a", "c", "b"]


def test_the_executor_binds_work_at_the_virtual_start():
    """With one core, b's work is called only once a's end is released: what b reads (the
    policy version) is what the workflow saw at b's virtual start."""

    async def main() -> list[tuple[str, int]]:
        version = 0
        seen: list[tuple[str, int]] = []
        executor: VirtualExecutor[str] = VirtualExecutor(VirtualClock(cores=1),
                                                         lambda start, result: 1.0)

        def work(key: str) -> Callable[[], asyncio.Future[None]]:
            async def run() -> None:
                seen.append((key, version))
            return lambda: asyncio.ensure_future(run())

        executor.submit("a", "actor", work("a"))
        executor.submit("b", "actor", work("b"))
        while (o := await executor.next()) is not None:
            version += 1  # the workflow publishes on every end
            assert isinstance(o.event, Event)
        return seen

    assert asyncio.run(main()) == [("a", 0), ("b", 1)]


def test_a_failed_run_is_released_as_a_failure_at_its_lower_bound():
    out = run_executor(2, {"a": (0.0, 1.0), "b": (0.1, 2.0)}, fail=frozenset({"b"}))
    assert [(o.event.key, o.event.time) for o in out] == [("b", 0.1), ("a", 1.0)]
    assert isinstance(out[0].error, RuntimeError) and out[0].result is None
    assert out[1].error is None


def test_a_duration_below_the_promised_bound_ends_the_run():
    with pytest.raises(ValueError, match="below its lower bound"):
        run_executor(1, {"a": (0.0, 0.05)})


def test_cancelling_running_work_releases_what_it_held_up():
    """stuck (started at 0, bound 0) holds up quick's end at 1 until it is cancelled."""

    async def main() -> tuple[list[str], bool, bool]:
        executor: VirtualExecutor[str] = VirtualExecutor(VirtualClock(cores=2),
                                                         lambda start, result: 1.0)
        hang = asyncio.Event()

        async def forever() -> str:
            await hang.wait()
            return "never"

        async def quick() -> str:
            return "quick"

        executor.submit("stuck", "learner", forever)
        executor.submit("quick", "actor", quick)
        waiting = asyncio.create_task(executor.next())
        await asyncio.sleep(0.05)
        held_up = not waiting.done()
        await executor.cancel("stuck")
        first = await asyncio.wait_for(waiting, 5)
        assert first is not None
        return [first.event.key], held_up, await executor.next() is None

    assert asyncio.run(main()) == (["quick"], True, True)


def test_only_invocations_started_on_a_virtual_core_run_for_real():
    async def main() -> int:
        executor: VirtualExecutor[str] = VirtualExecutor(VirtualClock(cores=2),
                                                         lambda start, result: 1.0)
        live, most = 0, 0

        async def work() -> None:
            nonlocal live, most
            live += 1
            most = max(most, live)
            await asyncio.sleep(0.01)
            live -= 1

        for key in "abcde":
            executor.submit(key, "actor", work)
        while await executor.next() is not None:
            pass
        return most

    assert asyncio.run(main()) == 2


def test_a_buffer_call_counts_the_transitions_it_inserts_or_samples():
    """An ingest reports ``added``, a sample ``rows``: either is the buffer's work; a result
    with neither (a learner's init, say) counts none and is refused."""
    assert units("buffer", {"added": 96, "rejected": []}) == 96.0
    assert units("buffer", {"rows": 64, "key": "k"}) == 64.0
    assert units("actor", {"steps": 128}) == 128.0
    assert not counts_units("learner", {"version": 0})
    with pytest.raises(KeyError, match="samples"):
        units("learner", {"version": 0})


def test_a_slots_retries_last_one_after_another_a_failed_one_its_intercept():
    calibration = Calibration(a=1.0, b=0.5)
    done = InvocationRecord("1", "actor", status="success", result={"steps": 4})
    failed = InvocationRecord("0", "actor", status="error")
    assert attempts_duration(calibration, "actor", done, 0.0) == 3.0
    assert attempts_duration(calibration, "actor", [failed, failed, done], 0.0) == 5.0


def test_a_learner_that_measured_a_hessian_lasts_its_products_longer():
    """Nitro's Hessian is work the samples do not count: its products (the subset's samples
    times the Lanczos steps taken) at the calibration's ``hessian`` each; none for an update
    without one, nor for another role's result."""
    calibration = Calibration(a=0.05, b=0.001, hessian=0.0001)
    plain = {"samples": 100, "version": 2}
    measured = {**plain, "hessian": {"samples": 50, "iterations": 20, "lambda_min": -1.0,
                                     "lambda_max": 2.0, "seconds": 9.9}}
    assert hessian_units("learner", plain) == 0.0
    assert hessian_units("learner", measured) == 1000.0
    assert hessian_units("actor", {"steps": 4, "hessian": measured["hessian"]}) == 0.0
    record = InvocationRecord("1", "learner", status="success", result=measured)
    assert attempts_duration(calibration, "learner", record, 0.0) == pytest.approx(0.25)
    record = InvocationRecord("1", "learner", status="success", result=plain)
    assert attempts_duration(calibration, "learner", record, 0.0) == pytest.approx(0.15)


def test_a_controller_on_the_virtual_clock_reads_the_modeled_clusters_time_and_cost() -> None:
    row = {rr.ROUND_S: 9.0, rr.VIRTUAL_S: 3.0, rr.COST_ROUND: 5.0, rr.VIRTUAL_COST_ROUND: 2.0,
           rr.COST_ACTORS: 4.0, rr.VIRTUAL_COST_ACTORS: 1.5, rr.COST_LEARNER: 1.0,
           rr.ACTOR_S_MEAN: 0.9, rr.VIRTUAL_ACTOR_S_MEAN: 0.25, rr.LEARNER_S: 0.7,
           rr.VIRTUAL_LEARNER_S: 0.5, rr.MEAN_RETURN: 10.0}
    view = virtual_view(row)
    assert (view[rr.ROUND_S], view[rr.COST_ROUND], view[rr.COST_ACTORS]) == (3.0, 2.0, 1.5)
    assert (view[rr.COST_LEARNER], view[rr.ACTOR_S_MEAN], view[rr.LEARNER_S]) == (0.5, 0.25, 0.5)
    assert view[rr.MEAN_RETURN] == 10.0 and row[rr.ROUND_S] == 9.0  # the row itself unchanged
    # A forecast's row (no learner yet) keeps what it lacks a virtual figure for.
    partial = {rr.COST_ACTORS: 4.0, rr.VIRTUAL_COST_ACTORS: 1.5, rr.ACTOR_S_MEAN: 0.9,
               rr.VIRTUAL_ACTOR_S_MEAN: 0.25}
    assert virtual_view(partial) == {**partial, rr.COST_ACTORS: 1.5, rr.ACTOR_S_MEAN: 0.25}
