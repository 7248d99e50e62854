"""Fair sharing in the pool, driven with a fake clock: who a contended container goes to."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from faasrl.invoker.fairshare import HALF_LIFE_S, FairShare
from faasrl.invoker.pool import Assign, Pool, Start, State, Stop
from faasrl.invoker.tenant import Tenant
from faasrl.manifest import FunctionSpec
from faasrl.resources import Resources

A, B = Tenant("job-a", "default"), Tenant("job-b", "default")


def spec(name: str = "f", **kw) -> FunctionSpec:
    kw.setdefault("cpu", 1.0)
    kw.setdefault("memory_mb", 128)
    return FunctionSpec(name=name, handler="m:h", **kw)


def pool(cpu: float = 1, memory_mb: int = 4096) -> Pool:
    ids = itertools.count(1)
    return Pool(Resources(cpu, memory_mb, 0), new_id=lambda: f"c{next(ids)}")


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def serve(p: Pool, cid: str, backlog: dict[str, Tenant], rounds: int, t: float = 0.0,
          run_s: float = 1.0) -> list[str]:
    """Release the one container ``rounds`` times, a run of ``run_s`` apart; each tenant
    whose waiter was served asks again at once (it stays backlogged). Returns whose waiter
    each release went to."""
    served, n = [], itertools.count()
    for _ in range(rounds):
        t += run_s
        (assign,) = of(p.release(cid, t), Assign)
        tenant = backlog[assign.waiter]
        served.append(tenant.key)
        waiter = f"{tenant.key}/{next(n)}"
        backlog[waiter] = tenant
        p.request("f", waiter, t, tenant=tenant)
    return served


def warm_container(p: Pool, t: float = 0.0) -> str:
    """One running container of ``f`` (its first invocation is nobody's of interest)."""
    p.register(spec(), t)
    (start,) = of(p.request("f", "first", t), Start)
    p.ready(start.container, t)
    return start.container


def test_two_tenants_of_equal_weight_alternate():
    p = pool()
    cid = warm_container(p)
    backlog = {f"a{i}": A for i in range(4)} | {f"b{i}": B for i in range(4)}
    for waiter, tenant in backlog.items():  # all of a's arrive before b's
        p.request("f", waiter, 0.1, tenant=tenant)
    served = serve(p, cid, backlog, 8)
    assert served == ["job-a", "job-b"] * 4  # first come, first served: a a a a b b b b


def test_a_tenant_of_weight_two_gets_twice_the_container():
    p = pool()
    cid = warm_container(p)
    heavy = Tenant("job-heavy", "default", weight=2.0)
    backlog = {"h": heavy, "l": B}
    for waiter, tenant in backlog.items():
        p.request("f", waiter, 0.1, tenant=tenant)
    counts = Counter(serve(p, cid, backlog, 60))
    assert counts["job-heavy"] == pytest.approx(2 * counts["job-b"], abs=2), counts


def test_namespaces_share_first_then_their_jobs():
    """Namespace lab-a runs one job, lab-b two: lab-a's job gets half, lab-b's a quarter each."""
    p = pool()
    cid = warm_container(p)
    solo, b1, b2 = (Tenant("solo", "lab-a"), Tenant("b1", "lab-b"), Tenant("b2", "lab-b"))
    backlog = {"b1": b1, "b2": b2, "solo": solo}
    for waiter, tenant in backlog.items():
        p.request("f", waiter, 0.1, tenant=tenant)
    counts = Counter(serve(p, cid, backlog, 80))
    assert counts["solo"] == pytest.approx(40, abs=2), counts
    assert counts["b1"] == pytest.approx(counts["b2"], abs=2), counts


def test_a_retry_goes_before_a_tenant_that_got_less():
    p = pool()
    cid = warm_container(p)
    backlog = {"a0": A}
    p.request("f", "a0", 0.1, tenant=A)
    serve(p, cid, backlog, 3)  # a has had the container for three seconds
    p.request("f", "b0", 3.5, tenant=B)
    p.request("f", "a-retry", 3.6, tenant=A, retry=True)
    (assign,) = of(p.release(cid, 4.0), Assign)
    assert assign.waiter == "a-retry"


def test_a_released_home_goes_to_its_fairest_key_not_its_oldest():
    """Two jobs' actor slots share one home (affinity: wait): the released home goes to the
    job that had less of it, though the other's key waited longer."""
    p = pool()
    p.register(spec(affinity="wait"), 0)
    (start,) = of(p.request("f", "a:0", 0, affinity="a:0", tenant=A), Start)
    cid = start.container
    p.ready(cid, 0)
    p.release(cid, 5.0)  # a had it for five seconds
    of(p.request("f", "b:0", 5.0, affinity="b:0", tenant=B), Assign)  # b's key: home c1 too
    p.request("f", "a:0'", 5.1, affinity="a:0", tenant=A)
    p.request("f", "b:0'", 5.2, affinity="b:0", tenant=B)
    (assign,) = of(p.release(cid, 6.0), Assign)
    assert assign.waiter == "b:0'"


def test_a_higher_priority_waiter_preempts_pre_warming_of_a_lower_one():
    """The node's cores are held by a low-priority job's actor containers still starting
    (pre-warmed, claimed by no invocation): a high-priority job's learner stops one of them
    and starts in its place."""
    p = pool(cpu=2)
    p.register(spec("actor"), 0)
    p.register(spec("learner"), 0)
    low, high = Tenant("low", "default", 1.0), Tenant("high", "default", 5.0)
    started, actions = p.prewarm("actor", 2, 0, tenant=low)
    assert started == 2
    actions = p.request("learner", "h", 1.0, tenant=high)
    (stop,) = of(actions, Stop)
    assert "preempted" in stop.reason
    assert p.container(stop.container).state is State.STOPPING
    (start,) = of(actions, Start)  # the cores it held are free at once, its memory is spare
    assert start.spec.name == "learner"


def test_an_equal_priority_waiter_does_not_preempt():
    p = pool(cpu=2)
    p.register(spec("actor"), 0)
    p.register(spec("learner"), 0)
    p.prewarm("actor", 2, 0, tenant=A)
    assert p.request("learner", "b", 1.0, tenant=B) == []


def test_a_running_invocation_is_never_preempted():
    """The low-priority job's containers run its invocations (one was pre-warmed, then
    claimed): the high-priority waiter waits for a release instead."""
    p = pool(cpu=2)
    p.register(spec("actor"), 0)
    p.register(spec("learner"), 0)
    low, high = Tenant("low", "default", 1.0), Tenant("high", "default", 5.0)
    _, actions = p.prewarm("actor", 1, 0, tenant=low)
    prewarmed = of(actions, Start)[0].container
    p.request("actor", "l1", 0.1, tenant=low)  # claims the pre-warm
    (cold,) = of(p.request("actor", "l2", 0.1, tenant=low), Start)
    p.ready(prewarmed, 0.5)
    p.ready(cold.container, 0.5)
    assert {c.state for c in p.containers()} == {State.BUSY}
    assert p.request("learner", "h", 1.0, tenant=high) == []
    actions = p.release(prewarmed, 2.0)  # the learner starts on the cores it gives back
    assert of(actions, Stop) == []
    assert [a.spec.name for a in of(actions, Start)] == ["learner"]


def test_usage_halves_every_half_life_and_share_compares_it_with_the_entitlement():
    fair = FairShare()
    fair.start(A, 1.0, 0.0)
    fair.start(B, 1.0, 0.0)
    fair.stop(B, 1.0, HALF_LIFE_S)  # b ran for one half-life, a runs on
    share = fair.share(A, 2 * HALF_LIFE_S)
    assert share.fair == pytest.approx(0.5)
    # a: 2 half-lives of running; b: 1 then 1 of decay. Integral of the decaying charge.
    assert share.got == pytest.approx(0.75 / (0.75 + 0.25), rel=1e-6)
    lab = Tenant("other", "lab-a", 1.0)
    assert fair.share(lab, 2 * HALF_LIFE_S, [lab]).fair == pytest.approx(0.5)  # its namespace's
    fair.stop(A, 1.0, 2 * HALF_LIFE_S)
    fair.forget_idle(1000 * HALF_LIFE_S)
    assert fair.share(A, 1000 * HALF_LIFE_S).got == 0.0


def test_a_job_and_a_function_named_like_its_id_do_not_share_usage():
    job = Tenant.of_job("0123456789ab", "default", 1.0)
    fn = Tenant.of_function("0123456789ab")
    fair = FairShare()
    fair.start(job, 0.5, 0.0)
    assert fair.key(job, 10.0)[1] > 0
    assert fair.key(fn, 10.0) == (fair.key(job, 10.0)[0], 0.0)
