"""Quotas in the pool, driven with a fake clock: namespaces' quotas, functions' concurrency."""

from __future__ import annotations

import itertools
import random

import pytest
from test_pool import of, only, pool, random_events, spec

from faasrl.invoker.errors import QueueTimeout, QuotaExceeded
from faasrl.invoker.pool import Assign, Reject, Start, State, Stop
from faasrl.invoker.quota import Quotas, Usage
from faasrl.invoker.tenant import Tenant
from faasrl.manifest import FunctionSpec
from faasrl.namespaces import Quota, namespace_of
from faasrl.resources import Resources

LAB_A, LAB_B = Tenant("job-a", "lab-a"), Tenant("job-b", "lab-b")


def qualified(name: str, **kw) -> FunctionSpec:
    """A function of another namespace than default, as the platform names it."""
    local = name.partition(".")[2]
    return spec(local, **kw).model_copy(update={"name": name})


def test_refusal_names_the_quota_that_would_be_exceeded():
    q = Quotas()
    q.set("lab-a", Quota(containers=2, memory_mb=1024))
    q.count(["lab-a"], Resources(1.0, 512, 0), True, +1)
    assert q.usage("lab-a") == Usage(1.0, 512, 0, 1)
    assert q.refusal("lab-a", Resources(1.0, 512, 0), 1) is None
    q.count(["lab-a"], Resources(1.0, 512, 0), False, +1)
    assert q.refusal("lab-a", Resources(1.0, 256, 0), 1) == \
        "namespace 'lab-a' is at its quota containers=2 (it holds 2)"
    assert q.refusal("lab-a", Resources(0.5), 0) is None  # cores only: no quota on them
    assert "memory_mb=1024" in q.refusal("lab-a", Resources(0, 1, 0), 0)
    assert q.refusal("lab-b", Resources(100, 1 << 20, 8), 50) is None  # no quota, no limit
    q.set("lab-a", Quota())
    assert not q.active


def test_a_namespace_with_one_container_queues_its_second_invocation_until_the_first_ends():
    p = pool()
    p.register(spec("actor"), 0)
    p.set_quota("lab-a", Quota(containers=1), 0)
    first = only(p.request("actor", "w1", 0, tenant=LAB_A), Start)
    assert p.request("actor", "w2", 0.1, tenant=LAB_A) == []  # the node has room; lab-a not
    assert p.usage("lab-a").containers == 1
    only(p.ready(first.container, 0.2), Assign)
    handed = only(p.release(first.container, 1.0), Assign)
    assert (handed.waiter, handed.container) == ("w2", first.container)
    assert p.usage("lab-a") == Usage(1.0, 128, 0, 1)


def test_a_waiter_past_its_queue_timeout_is_refused_naming_the_quota():
    p = pool(queue_timeout_s=5)
    p.register(spec("actor"), 0)
    p.set_quota("lab-a", Quota(containers=1), 0)
    p.request("actor", "w1", 0, tenant=LAB_A)
    p.request("actor", "w2", 0, tenant=LAB_A)
    p.request("actor", "w3", 0, tenant=LAB_B)  # another namespace is not held back by it
    rejects = {r.waiter: r.error for r in of(p.tick(6), Reject)}
    assert set(rejects) == {"w2"}
    assert isinstance(rejects["w2"], QuotaExceeded) and rejects["w2"].status == 429
    assert "quota containers=1" in rejects["w2"].message
    assert rejects["w2"].retry_after_s > 0


def test_a_waiter_short_of_node_capacity_still_times_out_as_before():
    p = pool(cpu=1, queue_timeout_s=5)
    p.register(spec("f"), 0)
    p.set_quota("lab-a", Quota(containers=4), 0)
    p.request("f", "w1", 0, tenant=LAB_A)
    p.request("f", "w2", 0, tenant=LAB_A)
    assert isinstance(only(p.tick(6), Reject).error, QueueTimeout)


def test_a_container_bigger_than_the_quota_is_refused_at_once():
    p = pool()
    p.register(spec("big", memory_mb=2048), 0)
    p.set_quota("lab-a", Quota(memory_mb=1024), 0)
    reject = only(p.request("big", "w", 0, tenant=LAB_A), Reject)
    assert "memory_mb=1024" in reject.error.message and isinstance(reject.error, QuotaExceeded)


def test_a_quota_waiter_holds_nothing_back_from_other_namespaces():
    """lab-a is at its cores: its waiter, first in line, must not keep lab-b's waiter (which
    arrives later and fits the node) from starting."""
    p = pool(cpu=2)
    p.register(spec("f"), 0)
    p.set_quota("lab-a", Quota(cores=1), 0)
    p.request("f", "a1", 0, tenant=LAB_A)
    assert p.request("f", "a2", 0, tenant=LAB_A) == []
    start = only(p.request("f", "b1", 0, tenant=LAB_B), Start)
    assert p.usage("lab-b").cores == 1.0 and p.usage("lab-a").cores == 1.0
    assert p.container(start.container).claims == ["b1"]


def test_raising_a_quota_lets_its_waiter_in():
    p = pool()
    p.register(spec("f"), 0)
    p.set_quota("lab-a", Quota(containers=1), 0)
    p.request("f", "a1", 0, tenant=LAB_A)
    p.request("f", "a2", 0, tenant=LAB_A)
    start = only(p.set_quota("lab-a", Quota(containers=2), 1), Start)
    assert p.container(start.container).claims == ["a2"]


def test_idle_containers_count_for_their_functions_namespace_busy_ones_for_the_tenant():
    p = pool()
    p.register(spec("actor"), 0)  # a built-in: namespace default
    cid = only(p.request("actor", "w", 0, tenant=LAB_A), Start).container
    assert p.usage("lab-a") == Usage(1.0, 128, 0, 1)  # starting for lab-a
    p.ready(cid, 0)
    assert p.usage("lab-a") == Usage(1.0, 128, 0, 1) and p.usage("default") == Usage()
    p.release(cid, 1)
    assert p.usage("lab-a") == Usage() and p.usage("default") == Usage(0.0, 128, 0, 1)


def test_an_idle_container_of_its_own_function_needs_only_its_cores():
    p = pool()
    p.register(qualified("lab-a.f"), 0)
    cid = only(p.request("lab-a.f", "w1", 0), Start).container  # its function's tenant
    p.ready(cid, 0)
    p.release(cid, 1)
    p.set_quota("lab-a", Quota(containers=1, cores=1), 1)
    assert only(p.request("lab-a.f", "w2", 2), Assign).container == cid


def test_prewarming_stays_within_the_functions_namespace_quota():
    p = pool()
    p.register(qualified("lab-a.f"), 0)
    p.set_quota("lab-a", Quota(containers=2), 0)
    started, _ = p.prewarm("lab-a.f", 5, 0)
    assert started == 2


def test_reserved_concurrency_keeps_capacity_for_its_function():
    """4 cores; 'r' reserves 2 invocations' worth (2 containers of 1 core): another function
    gets only 2 containers however many ask, and 'r' starts at once beside them."""
    p = pool(cpu=4)
    p.register(spec("r", reserved_concurrency=2), 0)
    p.register(spec("g"), 0)
    starts = [a for i in range(4) for a in of(p.request("g", f"g{i}", 0), Start)]
    assert len(starts) == 2
    assert len(of(p.request("r", "r1", 0), Start) + of(p.request("r", "r2", 0), Start)) == 2


def test_reserved_concurrency_is_also_its_functions_cap_and_answers_429_at_the_deadline():
    p = pool(cpu=8, queue_timeout_s=5)
    p.register(spec("r", reserved_concurrency=2), 0)
    for i in range(2):
        only(p.request("r", f"r{i}", 0), Start)
    assert p.request("r", "r2", 0) == []  # the node has room: the cap holds it
    reject = only(p.tick(6), Reject)
    assert isinstance(reject.error, QuotaExceeded)
    assert "'r' is at its reserved_concurrency of 2" in reject.error.message


def test_idle_containers_of_a_reserving_function_are_not_evicted_for_others():
    p = pool(cpu=4, memory_mb=256)
    p.register(spec("r", reserved_concurrency=1), 0)
    p.register(spec("g"), 0)
    cid = only(p.request("r", "r1", 0), Start).container
    p.ready(cid, 0)
    p.release(cid, 1)
    only(p.request("g", "g1", 2), Start)
    assert of(p.request("g", "g2", 2), Stop) == []  # 'r' keeps its memory


def test_concurrency_limit_caps_a_function_without_setting_capacity_aside():
    p = pool(cpu=4)
    p.register(spec("lim", concurrency_limit=1), 0)
    p.register(spec("g"), 0)
    assert len([a for i in range(4) for a in of(p.request("g", f"g{i}", 0), Start)]) == 4
    p2 = pool(cpu=4)
    p2.register(spec("lim", concurrency_limit=1, max_concurrency=4), 0)
    cid = only(p2.request("lim", "l1", 0), Start).container
    assert p2.request("lim", "l2", 0) == []  # a free slot on its container: the cap says no
    p2.ready(cid, 0)
    assert only(p2.release(cid, 1), Assign).waiter == "l2"


def test_one_of_reserved_concurrency_and_concurrency_limit():
    with pytest.raises(ValueError, match="set one of"):
        spec(reserved_concurrency=1, concurrency_limit=2)


def test_what_namespaces_hold_matches_a_recount_and_quotas_hold_at_every_step():
    """600 random events with tenants of two namespaces with quotas (and a third without):
    the running sums per namespace equal a recount under the documented rule, and no
    namespace with a quota ever holds more than it."""
    rng = random.Random(11)
    p = pool(cpu=6, memory_mb=4096, gpus=2, queue_timeout_s=20)
    quotas = {"lab-a": Quota(containers=2, cores=2), "lab-b": Quota(memory_mb=1024, gpus=1)}
    for ns, q in quotas.items():
        p.set_quota(ns, q, 0)
    names = ("a", "b", "c", "lab-a.d")
    p.register(spec("a", cpu=0.5), 0)
    p.register(spec("b", cpu=1.5, max_concurrency=2), 0)
    p.register(spec("c", cpu=0.25, gpu=1, memory_mb=512), 0)
    p.register(qualified("lab-a.d", cpu=1.0, memory_mb=256), 0)
    tenants = (LAB_A, LAB_B, Tenant("j", "default"))
    waiters = itertools.count()

    def request(now: float) -> list:
        name = rng.choice(names)
        tenant = LAB_A if name.startswith("lab-a.") else rng.choice(tenants)
        return p.request(name, f"w{next(waiters)}", now, tenant=tenant)

    refused = 0
    for step, actions in random_events(p, rng, request):
        refused += sum(isinstance(a, Reject) and isinstance(a.error, QuotaExceeded)
                       for a in actions)
        recount: dict[str, list[float]] = {}
        for c in p.containers():
            cores = c.need.cpu if c.state in (State.STARTING, State.BUSY) else 0.0
            for ns in c.charged or {namespace_of(c.function)}:
                held = recount.setdefault(ns, [0.0, 0, 0, 0])
                held[0] += cores
                held[1] += c.need.memory_mb
                held[2] += c.need.gpus
                held[3] += 1
        for ns in ("lab-a", "lab-b", "default"):
            u = p.usage(ns)
            assert [pytest.approx(u.cores), u.memory_mb, u.gpus, u.containers] == \
                recount.get(ns, [0.0, 0, 0, 0]), (step, ns)
        for ns, q in quotas.items():
            u = p.usage(ns)
            assert all(held <= limit + 1e-9 for held, limit in (
                (u.containers, q.containers), (u.cores, q.cores), (u.memory_mb, q.memory_mb),
                (u.gpus, q.gpus)) if limit is not None), (step, ns, u)
    assert refused > 0  # the quotas were in play


def test_a_first_quota_counts_what_the_namespace_held_before_it():
    """Without quotas the pool keeps no sums; the first quota set counts what is held."""
    p = pool()
    p.register(spec("f"), 0)
    cid = only(p.request("f", "w1", 0, tenant=LAB_A), Start).container
    p.ready(cid, 0)
    assert p.usage("lab-a") == Usage(1.0, 128, 0, 1)  # counted when asked
    assert p.set_quota("lab-a", Quota(containers=1), 1) == []
    assert p.request("f", "w2", 1, tenant=LAB_A) == []  # the busy one counts
    assert only(p.release(cid, 2), Assign).waiter == "w2"
