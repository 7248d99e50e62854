"""The pool state machine, driven with a fake clock: no processes, no sleeping."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from faasrl.invoker.errors import (
    CapacityError,
    FunctionGone,
    FunctionNotFound,
    QueueFull,
    QueueTimeout,
    StartFailed,
)
from faasrl.invoker.pool import (
    Action,
    Assign,
    Pool,
    Reject,
    Start,
    StartStem,
    State,
    Stop,
    StopStem,
)
from faasrl.invoker.tenant import Tenant
from faasrl.manifest import FunctionSpec
from faasrl.resources import Resources


def spec(name: str = "f", **kw) -> FunctionSpec:
    kw.setdefault("cpu", 1.0)
    kw.setdefault("memory_mb", 128)
    return FunctionSpec(name=name, handler="m:h", **kw)


def pool(cpu: float = 4, memory_mb: int = 4096, gpus: int = 0, **kw) -> Pool:
    ids = itertools.count(1)
    return Pool(Resources(cpu, memory_mb, gpus), range(gpus), new_id=lambda: f"c{next(ids)}",
                **kw)


def only(actions, kind):
    found = [a for a in actions if isinstance(a, kind)]
    assert len(found) == 1, actions
    return found[0]


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def test_cold_then_warm():
    p = pool()
    p.register(spec(), 0)
    start = only(p.request("f", "w1", 0), Start)
    assign = only(p.ready(start.container, 0.3), Assign)
    assert (assign.waiter, assign.cold, assign.bills_init) == ("w1", True, True)
    assert p.release(start.container, 0.4) == []
    assert p.container(start.container).state is State.IDLE
    warm = only(p.request("f", "w2", 1.0), Assign)
    assert (warm.container, warm.cold, warm.bills_init) == (start.container, False, False)


def test_keep_alive_expiry_reclaims_idle_container_and_frees_capacity():
    p = pool(cpu=1)
    p.register(spec(keep_alive_s=10), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    p.ready(cid, 0)
    p.release(cid, 1.0)
    assert of(p.tick(10.9), Stop) == []
    stop = only(p.tick(11.0), Stop)
    assert (stop.container, stop.reason) == (cid, "keep-alive expired")
    assert p.reserved == Resources(0.0, 128, 0)  # memory held until the process is gone
    p.stopped(cid, 11.1)
    assert p.reserved == Resources()


def test_min_warm_is_started_ahead_kept_through_keep_alive_and_serves_warm():
    p = pool()
    starts = of(p.register(spec(min_warm=2, keep_alive_s=1), 0), Start)
    assert len(starts) == 2
    for s in starts:
        p.ready(s.container, 0.5)
    assert of(p.tick(100), Stop) == []  # never below min_warm
    assign = only(p.request("f", "w", 100), Assign)
    assert not assign.cold and not assign.bills_init


def test_prewarm_counts_existing_containers_and_respects_capacity():
    p = pool(cpu=3)
    p.register(spec(), 0)
    started, actions = p.prewarm("f", 2, 0)
    assert started == 2 and len(of(actions, Start)) == 2
    assert p.prewarm("f", 2, 0)[0] == 0
    assert p.prewarm("f", 10, 0)[0] == 1  # only one more core free
    with pytest.raises(FunctionNotFound):
        p.prewarm("nope", 1, 0)


def test_invocation_joins_a_prewarm_in_progress_and_is_cold_but_not_billed_for_init():
    p = pool()
    p.register(spec(), 0)
    _, actions = p.prewarm("f", 1, 0)
    cid = only(actions, Start).container
    assert p.request("f", "w", 0.1) == []  # claims the starting container
    assign = only(p.ready(cid, 0.3), Assign)
    assert (assign.container, assign.cold, assign.bills_init) == (cid, True, False)


def test_queueing_when_capacity_is_exhausted_and_warm_handover():
    p = pool(cpu=1)
    p.register(spec(), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    assert p.request("f", "w2", 0) == []
    assert p.queued("f") == 1  # the starting container's one slot is w1's
    assign = only(p.ready(cid, 0.2), Assign)
    assert assign.waiter == "w1"
    assert p.queued("f") == 1
    handover = only(p.release(cid, 1.0), Assign)
    assert (handover.waiter, handover.container, handover.cold) == ("w2", cid, False)


def test_queue_full_is_rejected():
    p = pool(cpu=1, max_queue=1)
    p.register(spec(), 0)
    p.request("f", "w1", 0)  # starts the only container
    p.request("f", "w2", 0)  # claims nothing: max_concurrency=1
    reject = only(p.request("f", "w3", 0), Reject)
    assert reject.waiter == "w3" and isinstance(reject.error, QueueFull)
    assert isinstance(only(p.request("f", "w4", 0), Reject).error, QueueFull)


def test_queue_timeout():
    p = pool(cpu=1, queue_timeout_s=5)
    p.register(spec(), 0)
    p.request("f", "w1", 0)
    p.request("f", "w2", 1)
    assert of(p.tick(5.9), Reject) == []
    reject = only(p.tick(6.1), Reject)
    assert reject.waiter == "w2" and isinstance(reject.error, QueueTimeout)


def test_idle_containers_of_other_functions_are_evicted_for_a_waiter():
    p = pool(memory_mb=128)
    p.register(spec("a"), 0)
    p.register(spec("b"), 0)
    a = only(p.request("a", "w1", 0), Start).container
    p.ready(a, 0)
    p.release(a, 1)
    actions = p.request("b", "w2", 2)
    stop = only(actions, Stop)
    assert stop.container == a and "evicted" in stop.reason
    assert of(actions, Start) == []  # waits until the evicted container is gone
    start = only(p.stopped(a, 2.1), Start)
    assert start.spec.name == "b"


def test_no_eviction_when_it_would_not_make_enough_room():
    p = pool(memory_mb=256)
    p.register(spec("a"), 0)
    p.register(spec("b", memory_mb=256), 0)
    c1 = only(p.request("a", "w1", 0), Start).container
    c2 = only(p.request("a", "w2", 0), Start).container
    p.ready(c1, 0)
    p.ready(c2, 0)
    p.release(c2, 1)  # c1 stays busy
    assert p.request("b", "w3", 2) == []
    assert p.container(c2).state is State.IDLE
    actions = p.release(c1, 3)  # now both idle: evicting both makes room
    assert {s.container for s in of(actions, Stop)} == {c1, c2}


def test_blocked_waiter_holds_capacity_against_later_arrivals():
    p = pool(cpu=2)
    p.register(spec("a"), 0)
    p.register(spec("big", cpu=2), 0)
    p.register(spec("small"), 0)
    c = only(p.request("a", "w1", 0), Start).container
    p.ready(c, 0)  # busy with 1 of 2 cores
    assert p.request("big", "w2", 1) == []  # needs both cores
    assert p.request("small", "w3", 2) == []  # would fit, but big came first
    start = only(p.release(c, 3), Start)  # the idle container gives its cores back
    assert start.spec.name == "big"


def test_a_waiter_behind_a_blocked_function_is_still_served():
    """A dispatch pass stops early once only blocked functions' waiters are left: a later
    waiter of another function with a free slot must still get it."""
    p = pool(cpu=2)
    p.register(spec("a", cpu=2), 0)
    p.register(spec("b", max_concurrency=2), 0)
    b = only(p.request("b", "w0", 0), Start).container
    p.ready(b, 0)  # one of b's two slots is busy, with 1 of the 2 cores
    for i in range(3):
        assert p.request("a", f"a{i}", 1) == []  # a needs both cores
    assert only(p.request("b", "w1", 2), Assign).container == b  # the free slot, no cores
    assert p.queued("a") == 3


def test_a_handover_keeps_the_cores_with_their_function_until_nobody_of_it_waits():
    """A release that hands its container to the next waiter of the function changes nothing
    else (no pass); one that leaves it idle frees its cores for another function's waiter."""
    p = pool(cpu=1)
    p.register(spec("f"), 0)
    p.register(spec("g"), 0)
    cid = only(p.request("f", "f1", 0), Start).container
    p.ready(cid, 0)
    assert p.request("f", "f2", 1) == [] and p.request("f", "f3", 1) == []
    assert p.request("g", "g1", 2) == []
    assert [(type(a), a.waiter) for a in p.release(cid, 3)] == [(Assign, "f2")]
    assert [(type(a), a.waiter) for a in p.release(cid, 4)] == [(Assign, "f3")]
    assert only(p.release(cid, 5), Start).spec.name == "g"


def test_retry_goes_to_the_head_of_the_queue():
    p = pool(cpu=1)
    p.register(spec(), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    p.ready(cid, 0)
    p.request("f", "w2", 1)
    p.request("f", "retry", 2, retry=True)
    assert only(p.release(cid, 3), Assign).waiter == "retry"


def test_lost_container_is_stopped_once_and_frees_capacity_when_gone():
    p = pool(memory_mb=128)
    p.register(spec(), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    p.ready(cid, 0)
    assert only(p.lost(cid, "died", 1), Stop).container == cid
    assert p.lost(cid, "died", 1) == []
    assert p.release(cid, 1.1) == []  # the failed invocation's release changes nothing
    p.request("f", "w2", 1.2)  # waits: capacity still held by the dying container
    assert only(p.stopped(cid, 1.3), Start)


def test_start_failure_rejects_claimed_waiters_and_backs_off_min_warm():
    p = pool()
    first = only(p.register(spec(min_warm=1), 0), Start).container
    p.request("f", "w1", 0)
    err = StartFailed("boom", "InitError")
    reject = only(p.start_failed(first, err, 1), Reject)
    assert reject.waiter == "w1" and reject.error is err
    assert p.reserved == Resources()
    assert of(p.tick(1.1), Start) == []  # backing off
    assert len(of(p.tick(10), Start)) == 1


def test_new_version_retires_old_containers():
    p = pool()
    p.register(spec(), 0)
    idle = only(p.request("f", "w1", 0), Start).container
    busy = only(p.request("f", "w2", 0), Start).container
    p.ready(idle, 0)
    p.ready(busy, 0)
    p.release(idle, 1)
    actions = p.register(spec(memory_mb=256), 2)
    assert only(actions, Stop).container == idle
    start = only(p.request("f", "w3", 3), Start)  # never an old-version container
    assert start.spec.memory_mb == 256
    assert only(p.release(busy, 4), Stop).container == busy


def test_unregister_rejects_waiters_and_stops_containers():
    p = pool(cpu=1)
    p.register(spec(), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    p.ready(cid, 0)
    p.request("f", "w2", 0)
    actions = p.unregister("f", 1)
    assert isinstance(only(actions, Reject).error, FunctionGone)
    assert of(actions, Stop) == []  # busy: stopped when released
    assert only(p.release(cid, 2), Stop).container == cid
    with pytest.raises(FunctionNotFound):
        p.request("f", "w3", 3)


def test_function_larger_than_the_node_is_refused():
    p = pool(cpu=2, memory_mb=1024)
    with pytest.raises(CapacityError, match="cpu"):
        p.register(spec(cpu=4), 0)
    with pytest.raises(CapacityError, match="memory_mb"):
        p.register(spec(memory_mb=2048), 0)
    with pytest.raises(CapacityError, match="gpu"):
        p.register(spec(gpu=1), 0)


def test_gpus_are_assigned_by_index_and_returned():
    p = pool(gpus=2)
    p.register(spec(gpu=1), 0)
    a = only(p.request("f", "w1", 0), Start)
    b = only(p.request("f", "w2", 0), Start)
    assert {a.gpus, b.gpus} == {(0,), (1,)}
    assert p.request("f", "w3", 0) == []  # no GPU left
    p.ready(a.container, 0)
    p.ready(b.container, 0)
    p.lost(a.container, "gone", 1)
    p.release(b.container, 1)  # w3 takes b warm
    p.stopped(a.container, 2)
    assert only(p.request("f", "w4", 3), Start).gpus == a.gpus


def test_gpu_fractions_pack_onto_one_device_then_the_next():
    p = pool(cpu=8, gpus=2)
    p.register(spec("quarter", cpu=0.5, gpu=0.25), 0)
    starts = [only(p.request("quarter", f"w{i}", 0), Start) for i in range(5)]
    assert [s.gpus for s in starts] == [(0,)] * 4 + [(1,)]
    assert p.reserved.gpus == pytest.approx(1.25)


def test_a_whole_gpu_is_never_a_device_that_fractions_share():
    p = pool(cpu=8, gpus=2)
    p.register(spec("quarter", cpu=0.5, gpu=0.25), 0)
    p.register(spec("whole", cpu=0.5, gpu=1), 0)
    q1 = only(p.request("quarter", "q1", 0), Start)
    assert q1.gpus == (0,)
    assert only(p.request("whole", "w1", 0), Start).gpus == (1,)
    assert p.request("whole", "w2", 0) == []  # 0.75 of device 0 is free, but not all of it
    p.ready(q1.container, 0)
    p.lost(q1.container, "gone", 1)
    assert only(p.stopped(q1.container, 1), Start).gpus == (0,)  # all of it now


def test_a_released_fraction_is_free_for_the_next_fractional_container():
    p = pool(cpu=8, gpus=1)
    p.register(spec("half", cpu=0.5, gpu=0.5), 0)
    a, b = (only(p.request("half", f"w{i}", 0), Start) for i in range(2))
    assert a.gpus == b.gpus == (0,)
    assert p.request("half", "w2", 0) == []  # the device is full: it waits
    p.ready(a.container, 0)
    p.ready(b.container, 0)
    of(p.release(a.container, 1), Assign)  # w2 takes a warm: no third container
    p.lost(b.container, "gone", 2)
    assert p.stopped(b.container, 2) == []
    assert p.reserved.gpus == pytest.approx(0.5)
    assert only(p.request("half", "w3", 3), Start).gpus == (0,)


def test_gpu_fraction_shortfall_names_the_field():
    with pytest.raises(CapacityError, match=r"gpu: 0\.25 GPUs requested, 0 available"):
        pool().register(spec(gpu=0.25), 0)


def test_max_concurrency_shares_one_container():
    p = pool()
    p.register(spec(max_concurrency=2), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    assert p.request("f", "w2", 0) == []  # joins the same starting container
    assigns = of(p.ready(cid, 0.1), Assign)
    assert [a.container for a in assigns] == [cid, cid]
    assert [a.bills_init for a in assigns] == [True, False]
    assert only(p.request("f", "w3", 1), Start)  # both slots busy


def test_cancelled_waiter_releases_its_claim():
    p = pool()
    p.register(spec(), 0)
    cid = only(p.request("f", "w1", 0), Start).container
    p.cancel("w1", 0.1)
    assert p.ready(cid, 0.2) == []
    assert p.container(cid).state is State.IDLE


def test_idle_containers_hold_memory_but_not_cores():
    p = pool(cpu=1)
    p.register(spec("actor"), 0)
    p.register(spec("learner"), 0)
    a = only(p.request("actor", "w1", 0), Start).container
    p.ready(a, 0)
    p.release(a, 1)
    assert p.reserved == Resources(0.0, 128, 0)
    learner = only(p.request("learner", "w2", 2), Start).container  # no eviction needed
    p.ready(learner, 2.5)
    assert p.request("actor", "w3", 3) == []  # its container is idle, but the core is busy
    handover = only(p.release(learner, 4), Assign)
    assert (handover.waiter, handover.container, handover.cold) == ("w3", a, False)
    assert p.reserved == Resources(1.0, 256, 0)


def _two_warm(p: Pool) -> tuple[str, str]:
    p.register(spec(), 0)
    a, b = (s.container for s in of(p.request("f", "w1", 0) + p.request("f", "w2", 0), Start))
    p.ready(a, 0.1)
    p.ready(b, 0.1)
    return a, b


def test_affinity_picks_the_container_that_last_served_the_key():
    p = pool()
    a, b = _two_warm(p)
    p.release(a, 1.0)
    p.release(b, 2.0)  # b is the most recently used
    assert only(p.request("f", "x", 3.0, affinity="slot0"), Assign).container == b
    assert only(p.request("f", "y", 3.0, affinity="slot1"), Assign).container == a
    p.release(a, 4.0)  # now a (slot1) is the most recently used; slot0 still finds b
    p.release(b, 3.5)
    assert only(p.request("f", "x2", 5.0, affinity="slot0"), Assign).container == b
    assert only(p.request("f", "y2", 5.0, affinity="slot1"), Assign).container == a


def test_affinity_leaves_a_container_wanted_by_a_queued_key():
    p = pool(cpu=2)
    a, b = _two_warm(p)
    p.release(b, 1.0)
    p.release(a, 2.0)  # a is the most recently used
    only(p.request("f", "y0", 2.5, affinity="slot1"), Assign)  # a, the most recently used
    p.release(a, 2.6)
    p.register(spec("g"), 3.0)  # g's two containers take both cores
    g = [s.container for s in of(p.request("g", "g1", 3.0) + p.request("g", "g2", 3.0), Start)]
    for cid in g:
        p.ready(cid, 3.1)
    assert of(p.request("f", "x", 4.0, affinity="slot2"), Assign) == []
    assert of(p.request("f", "y", 4.0, affinity="slot1"), Assign) == []
    actions = p.release(g[0], 5.0) + p.release(g[1], 5.0)
    assigned = {x.waiter: x.container for x in of(actions, Assign)}
    assert assigned == {"x": b, "y": a}  # x does not take a, which slot1 is waiting for


def test_an_unknown_key_takes_the_most_recently_used():
    p = pool()
    a, b = _two_warm(p)
    p.release(a, 2.0)
    p.release(b, 1.0)
    assert only(p.request("f", "x", 3.0, affinity="new"), Assign).container == a


def test_a_new_key_prefers_a_container_no_key_is_bound_to():
    p = pool()
    a, b = _two_warm(p)
    p.release(a, 1.0)
    p.release(b, 1.0)
    only(p.request("f", "x", 2.0, affinity="slot0"), Assign)  # binds one of them
    bound = a if "slot0" in p.container(a).keys else b
    p.release(bound, 3.0)  # the most recently used now
    assert only(p.request("f", "y", 4.0, affinity="slot1"), Assign).container != bound


def _homes_of_three_keys(affinity: str) -> tuple[Pool, str, str]:
    """Two warm containers of ``f``: ``a`` is the home of k1, ``b`` of k2 and k3; k1 and k3
    run (both busy), 2 of the 4 cores are free."""
    p = pool()
    p.register(spec(affinity=affinity), 0)
    a, b = (s.container for s in of(p.request("f", "w1", 0) + p.request("f", "w2", 0), Start))
    p.ready(a, 0.1)
    p.ready(b, 0.1)
    p.release(a, 1.0)
    assert only(p.request("f", "x", 1.0, affinity="k1"), Assign).container == a
    p.release(b, 1.5)
    assert only(p.request("f", "y", 1.5, affinity="k2"), Assign).container == b
    p.release(a, 2.0)
    p.release(b, 2.0)
    assert only(p.request("f", "u", 3.0, affinity="k1"), Assign).container == a
    assert only(p.request("f", "v", 3.0, affinity="k3"), Assign).container == b
    assert p.container(a).keys == {"k1"} and p.container(b).keys == {"k2", "k3"}
    return p, a, b


def test_a_key_of_a_waiting_function_waits_for_its_busy_home():
    """An actor slot's envs are in its home: a free core and room for another container do
    not move it; the home's release hands it over, and another container's does not."""
    p, a, b = _homes_of_three_keys("wait")
    assert p.request("f", "w", 4.0, affinity="k2") == []  # no Start: b has its state
    assert p.release(a, 5.0) == []  # a is not k2's home: it stays idle
    assert only(p.release(b, 6.0), Assign) == Assign("w", b, cold=False, bills_init=False)


def test_a_key_held_for_its_home_does_not_hold_back_others():
    p, a, _ = _homes_of_three_keys("wait")
    p.release(a, 4.0)
    assert p.request("f", "w", 5.0, affinity="k2") == []  # waits for b
    assert only(p.request("f", "q", 5.0, affinity="k1"), Assign).container == a  # not behind w
    assert only(p.request("f", "n", 5.0), Start)  # a keyless invocation starts one


def test_a_key_whose_home_is_gone_goes_anywhere():
    p, a, b = _homes_of_three_keys("wait")
    assert p.request("f", "w", 4.0, affinity="k2") == []
    p.lost(b, "died", 4.5)
    assert only(p.stopped(b, 4.6), Start)  # its state is gone: a new container serves it
    p.release(a, 5.0)
    assert only(p.request("f", "z", 5.0, affinity="k3"), Assign).container == a


# The owners of the keys below: k1 and k2 are one job's actor slots.
OWNER = {"k1": Tenant.of_job("j1", "default", 1.0), "k2": Tenant.of_job("j1", "default", 1.0)}


def _one_jobs_homes(p: Pool) -> str:
    """``a`` home of j1's k1, ``b`` of its k2, both idle; then ``b`` dies. Returns ``a``."""
    p.register(spec(affinity="wait"), 0)
    a, b = (s.container for s in of(p.request("f", "w1", 0) + p.request("f", "w2", 0), Start))
    p.ready(a, 0.1)
    p.ready(b, 0.1)
    p.release(a, 1.0)
    p.release(b, 1.0)
    for waiter, key, home in (("x", "k1", a), ("y", "k2", b)):
        assert only(p.request("f", waiter, 2.0, affinity=key, tenant=OWNER[key]),
                    Assign).container == home
    p.release(a, 3.0)
    p.lost(b, "died", 3.5)
    p.stopped(b, 3.6)
    return a


def _retry_k2(p: Pool, now: float) -> list[Action]:
    return p.request("f", "y2", now, retry=True, affinity="k2", tenant=OWNER["k2"])


@pytest.mark.parametrize("prewarmed", [False, True])
def test_a_retry_does_not_move_in_with_its_jobs_other_key(prewarmed):
    """Had k2's retry taken ``a``, idle beside it, the job's two actor slots would share a
    home and run one after the other every round: it takes a starting container, else a new
    one, as its died container's replacement."""
    p = pool()
    a = _one_jobs_homes(p)
    if prewarmed:
        started = only(p.prewarm("f", 2, 4.0)[1], Start).container
        assert _retry_k2(p, 4.0) == []  # it claims the starting one
    else:
        started = only(_retry_k2(p, 4.0), Start).container
    assert started != a
    assert only(p.ready(started, 4.1), Assign) == Assign("y2", started, cold=True,
                                                         bills_init=not prewarmed)
    assert p.container(a).keys == {"k1"} and p.container(started).keys == {"k2"}


def test_a_retry_moves_in_with_its_jobs_other_key_when_nothing_else_can_start():
    p = pool(memory_mb=256)
    p.register(spec("g"), 0)
    a = _one_jobs_homes(p)
    p.ready(only(p.request("g", "g1", 4.0), Start).container, 4.1)  # the memory b had
    assert only(_retry_k2(p, 5.0), Assign).container == a  # not wait for a release


def test_a_key_of_a_preferring_function_does_not_wait_for_its_home():
    """A learner's warm weights are a cache: it takes capacity rather than wait."""
    p, _, _ = _homes_of_three_keys("prefer")
    assert only(p.request("f", "w", 4.0, affinity="k2"), Start)


def test_eviction_spares_the_homes_of_waiting_state():
    p = pool(cpu=4, memory_mb=384)
    p.register(spec("f", affinity="wait"), 0)
    p.register(spec("g"), 0)
    p.register(spec("h", memory_mb=256), 0)
    f = only(p.request("f", "w1", 0, affinity="k"), Start).container
    g = only(p.request("g", "w2", 0), Start).container
    p.ready(f, 0.1)
    p.ready(g, 0.1)
    p.release(f, 1.0)
    p.release(g, 2.0)  # f, the home of k, is the least recently used
    stops = of(p.request("h", "w3", 3.0), Stop)
    assert [s.container for s in stops] == [g]


def test_resize_lets_a_waiter_start_once_a_node_joins():
    p = pool(cpu=1)
    p.register(spec("a"), 0)
    first = only(p.request("a", "w1", 0), Start)
    assert p.request("a", "w2", 0) == []  # the one core is taken: w2 waits
    second = only(p.resize(Resources(2, 4096), [], 1), Start)
    assert second.container != first.container
    assert p.capacity.cpu == 2


# ----------------------------------------------------------------------------- stem cells
def ready_stems(p: Pool, actions, memory_mb: float = 300.0, now: float = 0.0) -> list[str]:
    """Report every StartStem in ``actions`` ready; returns their ids."""
    stems = [a.stem for a in of(actions, StartStem)]
    for sid in stems:
        p.stem_ready(sid, memory_mb, now)
    return stems


def test_stem_cells_are_kept_per_image_taken_once_and_refilled():
    p = pool(stem_cells=1, stem_memory_mb=1000)
    p.register(spec("a", memory_mb=512), 0)
    p.register(spec("b", memory_mb=512), 0)
    p.register(spec("c", memory_mb=512, image="other:1"), 0)
    started = of(p.tick(0.25), StartStem)
    assert sorted(a.image for a in started) == ["", "other:1"]
    assert p.reserved == Resources(0.0, 2000, 0)  # memory only: they wait at a low weight
    ready_stems(p, started)
    default = next(a.stem for a in started if a.image == "")
    first = only(p.request("a", "w1", 1.0), Start)
    assert first.stem == first.container == default  # the cell's id is the container's
    assert p.reserved == Resources(1.0, 1512, 0)  # the cell's memory became the container's
    second = only(p.request("b", "w2", 1.0), Start)
    assert second.stem is None  # taken: a stem cell belongs to one container, for good
    refill = only(p.tick(1.25), StartStem)
    assert refill.image == "" and refill.stem != default
    assert of(p.tick(1.5), StartStem) == []  # the refill counts while it starts


def test_no_stem_cell_for_a_function_it_cannot_become():
    p = pool(gpus=1, stem_cells=1)
    p.register(spec("small", memory_mb=400), 0)  # 300 MB in use + 128 headroom > 400
    p.register(spec("gpu", memory_mb=2048, gpu=1), 0)
    ready_stems(p, p.tick(0.25), memory_mb=300)
    assert only(p.request("small", "w1", 1), Start).stem is None
    assert only(p.request("gpu", "w2", 1), Start).stem is None
    assert len(p.stems()) == 1


def test_stem_cells_are_evicted_first_and_refilled_when_memory_is_free():
    p = pool(memory_mb=1500, stem_cells=1, stem_memory_mb=1000)
    p.register(spec("small", memory_mb=400), 0)  # cannot take the cell (too small)
    (sid,) = ready_stems(p, p.tick(0.25))
    start = only(p.request("small", "w1", 1), Start)
    assert start.stem is None
    p.ready(start.container, 1)
    p.release(start.container, 1)
    p.register(spec("big", memory_mb=1000, image="big:1"), 1)  # not the cell's image
    actions = p.request("big", "w2", 2)
    stop = only(actions, StopStem)
    assert stop.stem == sid and "evicted" in stop.reason
    assert of(actions, Start) == []  # waits for the cell's memory
    big = only(p.stem_stopped(sid, 2.1), Start)
    assert big.spec.name == "big" and big.stem is None
    assert of(p.tick(2.25), StartStem) == []  # no memory to spare for a new one
    p.stopped(start.container, 3)  # 400 MB back: still short of a cell's 1000
    assert of(p.tick(3.25), StartStem) == []
    p.stopped(big.container, 4)
    assert len(of(p.tick(4.25), StartStem)) == 1  # of the two images, as memory allows


def test_a_failed_stem_cell_backs_off_and_a_lost_one_is_replaced():
    p = pool(stem_cells=1)
    p.register(spec("a", memory_mb=1024), 0)
    sid = only(p.tick(0.25), StartStem).stem
    p.stem_failed(sid, 0.3)
    assert of(p.tick(0.5), StartStem) == []  # backs off (1 s after the first failure)
    (sid,) = ready_stems(p, p.tick(1.5))
    assert only(p.stem_lost(sid, "exited with status 1"), StopStem).stem == sid
    assert p.stem_lost(sid, "again") == []
    assert len(of(p.tick(1.75), StartStem)) == 1  # replaced while the lost one stops
    assert p.reserved == Resources(0.0, 2048, 0)  # which holds its memory until it is gone
    p.stem_stopped(sid, 1.8)
    assert p.reserved == Resources(0.0, 1024, 0)


def test_stem_cells_of_an_image_no_function_runs_are_stopped():
    p = pool(stem_cells=1)
    p.register(spec("a", memory_mb=1024, image="x:1"), 0)
    (sid,) = ready_stems(p, p.tick(0.25))
    p.unregister("a", 1)
    assert only(p.tick(1.25), StopStem).stem == sid


def test_no_stem_cells_unless_asked():
    p = pool()
    p.register(spec("a", memory_mb=1024), 0)
    assert of(p.tick(0.25), StartStem) == []
    assert only(p.request("a", "w", 1), Start).stem is None


TENANTS = (None, Tenant("job-1", "default", 2.0), Tenant("job-2", "lab-a", 1.0))


def random_events(p: Pool, rng: random.Random, request: Callable[[float], list[Action]],
                  steps: int = 600, **more: Callable[[float], list[Action]]
                  ) -> Iterator[tuple[int, list[Action]]]:
    """Drive ``p`` through ``steps`` random events, as an invoker would carry its actions out:
    requests (``request(now)``), ready, release, lost, stopped, tick, and the ``more`` named.
    Yields each step and its actions."""
    starting: set[str] = set()
    busy: list[str] = []
    stopping: set[str] = set()
    kinds = ("request", "request", "ready", "release", "release", "lost", "stopped", "tick",
             *more)
    for step in range(steps):
        now = float(step)
        event = rng.choice(kinds)
        actions: list[Action] = []
        if event == "request":
            actions = request(now)
        elif event == "ready" and starting:
            cid = rng.choice(sorted(starting))
            starting.discard(cid)
            if p.container(cid) is not None and p.container(cid).state is State.STARTING:
                actions = p.ready(cid, now)
        elif event == "release" and busy:
            cid = busy.pop(rng.randrange(len(busy)))
            if p.container(cid) is not None:
                actions = p.release(cid, now)
        elif event == "lost" and p.containers():
            actions = p.lost(rng.choice(p.containers()).id, "test", now)
        elif event == "stopped" and stopping:
            cid = rng.choice(sorted(stopping))
            stopping.discard(cid)
            busy[:] = [b for b in busy if b != cid]
            actions = p.stopped(cid, now)
        elif event == "tick":
            actions = p.tick(now)
        elif event in more:
            actions = more[event](now)
        for a in actions:
            if isinstance(a, Start):
                starting.add(a.container)
            elif isinstance(a, Assign):
                busy.append(a.container)
            elif isinstance(a, Stop):
                stopping.add(a.container)
        yield step, actions


def test_the_running_sums_of_what_containers_hold_match_a_recount():
    """The pool keeps what its containers hold as running sums; after any sequence of events
    they must equal the sum over its containers (cores only while starting or busy; memory
    and GPUs always)."""
    rng = random.Random(7)
    p = pool(cpu=3, memory_mb=2048, gpus=2)
    names = ("a", "b", "c")
    p.register(spec("a", cpu=0.5), 0)
    p.register(spec("b", cpu=1.5, max_concurrency=2), 0)
    p.register(spec("c", cpu=0.25, gpu=1, memory_mb=512), 0)
    waiters = itertools.count()
    for step, _ in random_events(
            p, rng, lambda now: p.request(rng.choice(names), f"w{next(waiters)}", now,
                                          tenant=rng.choice(TENANTS)),
            redeploy=lambda now: p.register(spec(rng.choice(names), cpu=0.5), now)):
        cpu = sum(c.need.cpu for c in p.containers()
                  if c.state in (State.STARTING, State.BUSY))
        memory = sum(c.need.memory_mb for c in p.containers())
        gpus = sum(c.need.gpus for c in p.containers())
        assert p.reserved == Resources(cpu, memory, gpus), step
        # So are who waits (per function and tenant) and what each tenant is charged per second.
        queued = Counter((w.function, w.who.key) for w in p._queue.values())
        assert {(f, k): n for f, by in p._queued_by.items() for k, n in by.items()} == queued
        running = Counter()
        for c in p.containers():
            for tenant in c.running:
                running[tenant.key] += c.share
        charged = {k: u.running for k, u in p._fair._tenants.items() if u.running > 1e-9}
        assert charged == pytest.approx(+running), step
