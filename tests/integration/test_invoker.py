"""The invoker's query API (what the gateway and the job manager see of the node), on the
process backend: real containers, no gateway in between."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import TEST_FUNCTIONS, pid_alive

from faasrl.backends.process import ProcessBackend
from faasrl.invoker import ContainerInfo, Invoker, InvokerConfig, Pool, State
from faasrl.invoker.errors import CapacityError, FunctionNotFound
from faasrl.invoker.tenant import Tenant
from faasrl.manifest import FunctionSpec
from faasrl.resources import Resources

NODE = Resources(cpu=2.0, memory_mb=1024, gpus=0)


def spec(name: str = "t", handler: str = "fns:echo", **kw: Any) -> FunctionSpec:
    return FunctionSpec(name=name, handler=handler,
                        **{"code_dir": str(TEST_FUNCTIONS), "cpu": 0.5, "memory_mb": 256, **kw})


def run(tmp_path: Path, scenario: Callable[[Invoker], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        invoker = Invoker(ProcessBackend(tmp_path), Pool(NODE, queue_timeout_s=30),
                          config=InvokerConfig(maintain_interval_s=0.05))
        await invoker.start()
        try:
            return await scenario(invoker)
        finally:
            await invoker.close()

    return asyncio.run(main())


async def settled(invoker: Invoker, check: Callable[[list[ContainerInfo]], bool],
                  what: str, timeout_s: float = 20.0) -> list[ContainerInfo]:
    """The node's containers once ``check`` holds for them."""
    try:
        async with asyncio.timeout(timeout_s):
            while not check(found := invoker.containers()):
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}: {invoker.containers()}") from None
    return found


def test_functions_are_listed_in_registration_order_and_looked_up_by_name(tmp_path):
    async def scenario(invoker: Invoker) -> None:
        invoker.register(spec("b"))
        invoker.register(spec("a", timeout_s=5))
        invoker.register(spec("b", timeout_s=7))  # a replacement keeps its place
        assert [s.name for s in invoker.functions()] == ["b", "a"]
        assert invoker.spec("b").timeout_s == 7
        with pytest.raises(FunctionNotFound):
            invoker.spec("c")
        invoker.unregister("b")
        assert [s.name for s in invoker.functions()] == ["a"]
        with pytest.raises(FunctionNotFound):
            invoker.spec("b")

    run(tmp_path, scenario)


def test_shortfall_names_every_field_the_node_or_its_backend_refuses(tmp_path):
    async def scenario(invoker: Invoker) -> None:
        assert invoker.shortfall(spec()) == {}
        too_big = spec(cpu=4, memory_mb=2048, gpu=1)
        assert invoker.shortfall(too_big) == {
            "cpu": "4 cores requested, 2 available",
            "memory_mb": "2048 MB requested, 1024 available",
            "gpu": "1 GPUs requested, 0 available"}
        unrunnable = spec(image="me/fn:1", code_dir=str(tmp_path / "missing"))
        assert set(invoker.shortfall(unrunnable)) == {"image", "code_dir"}
        assert set(invoker.shortfall(too_big.model_copy(update={"image": "x"}))) == {
            "cpu", "memory_mb", "gpu", "image"}
        with pytest.raises(CapacityError):  # what shortfall warns of, register refuses
            invoker.register(too_big)
        assert invoker.functions() == []

    run(tmp_path, scenario)


def test_containers_capacity_and_stats_follow_the_pool(tmp_path):
    async def scenario(invoker: Invoker) -> list[int]:
        assert invoker.backend_name == "process"
        assert invoker.capacity == NODE
        invoker.register(spec())
        assert invoker.prewarm("t", 2) == 2
        idle = await settled(invoker, lambda cs: len(cs) == 2
                             and all(c.state == State.IDLE for c in cs), "two idle containers")
        assert [c.function for c in idle] == ["t", "t"]
        assert idle[0].created_at <= idle[1].created_at  # oldest first
        assert all(c.handle is not None and pid_alive(c.handle.pid) for c in idle)
        assert all(c.served == 0 and c.inflight == 0 and c.idle_since is not None for c in idle)
        # Idle containers hold their memory, not their cores.
        assert invoker.reserved == Resources(cpu=0.0, memory_mb=512, gpus=0)
        stats = invoker.container_stats(idle[0].id)
        assert stats is not None and stats.memory_mb > 1

        rec = await invoker.invoke("t", {"x": 1})
        assert rec.status == "success" and rec.container in {c.id for c in idle}
        after = {c.id: c for c in invoker.containers()}
        assert after[rec.container].served == 1
        assert [c.served for c in idle] == [0, 0]  # what was read earlier does not change

        invoker.unregister("t")
        await settled(invoker, lambda cs: cs == [], "the retired containers to be gone")
        assert invoker.reserved == Resources()
        assert invoker.container_stats(idle[0].id) is None
        return [c.handle.pid for c in idle if c.handle and c.handle.pid]

    pids = run(tmp_path, scenario)
    assert not any(pid_alive(p) for p in pids)


def test_queued_counts_invocations_waiting_for_a_container(tmp_path):
    async def scenario(invoker: Invoker) -> None:
        invoker.register(spec(handler="fns:sleep", memory_mb=1024))  # one container fits
        first = asyncio.create_task(invoker.invoke("t", {"s": 0.5}))
        await settled(invoker, lambda cs: any(c.state == State.BUSY for c in cs),
                      "the first invocation to run")
        second = asyncio.create_task(invoker.invoke("t", {"s": 0.0}))
        async with asyncio.timeout(5):  # the only container is busy: it waits
            while invoker.queued("t") != 1:
                await asyncio.sleep(0.01)
        assert invoker.queued("other") == 0
        done = await asyncio.gather(first, second)
        assert [r.status for r in done] == ["success", "success"]
        assert done[0].container == done[1].container  # handed over warm
        assert invoker.queued("t") == 0

    run(tmp_path, scenario)


async def stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Once every thread of ``pid`` is stopped: SIGSTOP lands asynchronously."""
    async with asyncio.timeout(timeout_s):
        while any(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                  != "T" for tid in os.listdir(f"/proc/{pid}/task")):
            await asyncio.sleep(0.005)


def test_a_runtime_that_stops_answering_times_out_without_a_retry(tmp_path):
    """A runtime stuck past deadline + grace (here: stopped) cannot say Timeout itself: the
    invoker's own deadline ends the invocation once. A retry would run it a second time."""
    async def scenario(invoker: Invoker) -> None:
        invoker.register(spec(timeout_s=0.5))
        warm = await invoker.invoke("t", {"x": 1})
        pid = warm.result["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            await stopped(pid)
            stuck = await invoker.invoke("t", {"x": 2})
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert (stuck.status, stuck.attempts, (stuck.error or {}).get("type")) == \
            ("timeout", 1, "Timeout"), (warm, stuck)
        assert stuck.container == warm.container
        await settled(invoker, lambda cs: all(c.id != warm.container for c in cs),
                      "the stuck container to be stopped")

    run(tmp_path, scenario)


def test_a_higher_priority_invocation_cancels_a_lower_ones_pre_warm_still_starting(tmp_path):
    """The node's cores are held by containers a priority-1 job pre-warmed, still importing
    their handler: a priority-5 job's invocation of another function stops one of them (its
    start is cancelled, its process gone) and runs at once, not after their slow start."""
    low, high = Tenant("low", "default", 1.0), Tenant("high", "default", 5.0)

    async def scenario(invoker: Invoker) -> None:
        invoker.register(spec("slow", "slow_start:echo", cpu=1.0, env={"SLOW_START_S": "30"}))
        invoker.register(spec("t", cpu=1.0))
        assert invoker.prewarm("slow", 2, tenant=low) == 2
        await settled(invoker, lambda cs: [c.state for c in cs] == [State.STARTING] * 2,
                      "two slow containers starting")
        async with asyncio.timeout(20):  # a slow start takes 30 s
            rec = await invoker.invoke("t", {"x": 1}, tenant=high)
        assert rec.status == "success" and rec.result["args"] == {"x": 1}
        found = await settled(invoker, lambda cs: sum(c.function == "slow" for c in cs) == 1,
                              "one pre-warm preempted and gone")
        assert {c.function for c in found} == {"slow", "t"}

    run(tmp_path, scenario)
