"""Lent cores in the pool: a run that asks for more than its function's cpu (a synchronous
job's learner, for its idle actors' cores) gets the whole free cores nothing else waits for,
within its cpu_max, its tenant's fair share and its namespace's quota, and holds them until it
ends."""

from __future__ import annotations

from test_pool import of, only, pool, spec

from faasrl.invoker.pool import Assign, Pool, Start
from faasrl.invoker.tenant import Tenant
from faasrl.namespaces import Quota
from faasrl.resources import Resources

JOB, OTHER = Tenant.of_job("a", "default", 1.0), Tenant.of_job("b", "default", 1.0)


def warm_learner(p: Pool, cpu_max: float | None = 4, now: float = 0.0) -> str:
    """A learner container run once and idle, as a job's learner is after its first round."""
    p.register(spec("learner", cpu_max=cpu_max), now)
    cid = only(p.request("learner", "first", now, tenant=JOB), Start).container
    p.ready(cid, now)
    p.release(cid, now)
    return cid


def test_a_warm_run_gets_the_free_cores_it_asks_for_and_holds_them_until_it_ends():
    p = pool(cpu=4)
    cid = warm_learner(p)
    run = only(p.request("learner", "w", 1.0, tenant=JOB, cores=3), Assign)
    assert (run.container, run.cores) == (cid, 3.0)
    assert p.reserved.cpu == 3.0  # its own core and two lent
    p.register(spec("actor"), 1.0)
    assert p.request("actor", "a1", 1.1) != []  # the fourth core starts an actor
    assert p.request("actor", "a2", 1.2) == []  # the lent ones are not free
    p.release(cid, 2.0)  # ... until the run ends; the actor then gets its core
    assert p.reserved.cpu == 2.0  # the two actors' starts
    assert p.container(cid).lent == 0.0
    plain = only(p.request("learner", "w2", 3.0, tenant=JOB), Assign)
    assert plain.cores == 1.0  # not asking: its own core, which the runtime is told


def test_lent_cores_stop_at_cpu_max_and_at_what_the_node_has_free():
    p = pool(cpu=8)
    warm_learner(p, cpu_max=2)
    assert only(p.request("learner", "w", 1.0, tenant=JOB, cores=8), Assign).cores == 2.0
    q = pool(cpu=3)
    cid = warm_learner(q)
    q.register(spec("actor", cpu=1.5), 0)
    q.request("actor", "a", 0.5)  # 1.5 cores held: 1.5 free, one whole core for the learner
    assert only(q.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign).cores == 1.0
    q.release(cid, 2.0)


def test_a_function_without_cpu_max_gets_its_cpu_and_no_threads_told():
    p = pool(cpu=4)
    warm_learner(p, cpu_max=None)
    run = only(p.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign)
    assert run.cores == 0.0
    assert p.reserved.cpu == 1.0


def test_nothing_is_lent_while_another_invocation_waits():
    p = pool(cpu=4)
    warm_learner(p)
    p.register(spec("actor", cpu=2, concurrency_limit=1), 0)
    p.ready(only(p.request("actor", "a1", 0.1), Start).container, 0.1)
    assert p.request("actor", "a2", 0.2) == []  # waits for the function's limit
    assert only(p.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign).cores == 1.0


def test_lent_cores_stay_within_the_tenants_part_among_those_running_now():
    p = pool(cpu=4)
    cid = warm_learner(p)
    p.register(spec("actor"), 0)
    other = only(p.request("actor", "b1", 0.5, tenant=OTHER), Start).container
    p.ready(other, 0.5)  # the other job runs: half the node's four cores each, three free
    assert only(p.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign).cores == 2.0
    p.release(cid, 2.0)
    p.release(other, 2.5)  # it ran just now, but runs nothing now: the learner takes all four
    assert only(p.request("learner", "w2", 3.0, tenant=JOB, cores=4), Assign).cores == 4.0


def test_lent_cores_stay_within_the_namespaces_core_quota():
    p = pool(cpu=4)
    warm_learner(p)
    p.set_quota("default", Quota(cores=2), 0.5)
    assert only(p.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign).cores == 2.0
    assert p.usage("default").cores == 2.0


def test_a_lent_run_whose_container_dies_gives_back_every_core():
    p = pool(cpu=4)
    cid = warm_learner(p)
    only(p.request("learner", "w", 1.0, tenant=JOB, cores=4), Assign)
    assert p.reserved.cpu == 4.0
    p.lost(cid, "killed", 1.5)
    p.stopped(cid, 1.6)
    assert p.reserved == Resources()
    assert of(p.tick(2.0), Assign) == []


def test_a_lent_run_is_charged_its_cores_in_fair_share():
    got = {}
    for cores in (4, 0):
        p = pool(cpu=8)
        cid = warm_learner(p)
        p.register(spec("actor"), 0)
        only(p.request("learner", "w", 10.0, tenant=JOB, cores=cores), Assign)
        other = only(p.request("actor", "b", 10.0, tenant=OTHER), Start).container
        p.ready(other, 10.0)
        p.release(cid, 20.0)
        p.release(other, 20.0)
        got[cores] = p.share(JOB, 20.0).got
    assert abs(got[4] - 0.8) < 1e-6 and abs(got[0] - 0.5) < 1e-6  # 4 cores to 1, then 1 to 1
