"""The workflow core without functions: trigger primitives on a buffer, and the engine that runs
rules as tasks finish."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest

from faasrl.workflow.engine import Engine, WorkflowStalled
from faasrl.workflow.trigger_buffer import GRADIENTS, POLICY, TRAJECTORIES, Item, TriggerBuffer
from faasrl.workflow.triggers import (
    DataKeyTrigger,
    ObjectKeyTrigger,
    Rule,
    TimeTrigger,
    TransferTrigger,
)
from faasrl.workflow.virtual_clock import VirtualClock, VirtualExecutor


def batch(entry: str, slot: int, size: int = 10, keys: tuple[str, ...] = ("obs",)) -> Item:
    return Item(entry=entry, slot=slot, version=0, size=size, keys=frozenset(keys))


def test_data_key_trigger_waits_for_n_distinct_actors_of_enough_size():
    buffer, n = TriggerBuffer(), [2]
    trigger = DataKeyTrigger(n=lambda: n[0], size=10, keys=("obs",))
    buffer.put(TRAJECTORIES, batch("a", slot=0))
    buffer.put(TRAJECTORIES, batch("b", slot=0))  # the same actor twice is one actor
    buffer.put(TRAJECTORIES, batch("c", slot=1, size=9))  # too small
    buffer.put(TRAJECTORIES, batch("d", slot=2, keys=("rewards",)))  # other keys
    assert trigger.check(buffer) == (False, {})
    buffer.put(TRAJECTORIES, batch("e", slot=3))
    satisfied, message = trigger.check(buffer)
    assert satisfied and [i.entry for i in message["items"]] == ["a", "e"]  # oldest per slot
    n[0] = 3  # the controller's I_k changed: the same buffer no longer suffices
    assert not trigger.check(buffer)[0]
    assert not DataKeyTrigger(n=1, stream=GRADIENTS).check(buffer)[0]


def test_object_key_trigger_fires_once_per_new_version_or_while_it_exists():
    buffer, new, any_version = TriggerBuffer(), ObjectKeyTrigger(POLICY), ObjectKeyTrigger(
        POLICY, new_only=False)
    assert not new.check(buffer)[0] and not any_version.check(buffer)[0]
    buffer.publish(POLICY, 3)
    assert new.check(buffer) == (True, {"key": POLICY, "version": 3})
    assert not new.check(buffer)[0]  # version 3 already started a round
    assert any_version.check(buffer)[0] and any_version.check(buffer)[0]
    buffer.publish(POLICY, 4)
    assert new.check(buffer)[1]["version"] == 4
    new.reset()  # a round that runs again from the same version
    assert new.check(buffer)[0]


def test_time_trigger_fires_each_period_and_says_when():
    now = [100.0]
    trigger = TimeTrigger(5.0, clock=lambda: now[0])
    assert trigger.deadline() == 105.0 and not trigger.check(TriggerBuffer())[0]
    now[0] = 106.0
    assert trigger.check(TriggerBuffer()) == (True, {"elapsed_s": 6.0})
    assert trigger.deadline() == 111.0 and not trigger.check(TriggerBuffer())[0]


def test_transfer_trigger_moves_keys_in_order():
    buffer, trigger = TriggerBuffer(), TransferTrigger(keys=("rewards", "obs"))
    buffer.stage("e1", "obs")  # observations first: they must wait for the rewards
    assert not trigger.check(buffer)[0]
    buffer.stage("e1", "rewards")
    assert trigger.check(buffer) == (True, {"entry": "e1", "key": "rewards", "last": False})
    assert trigger.check(buffer) == (True, {"entry": "e1", "key": "obs", "last": True})
    assert not trigger.check(buffer)[0]


async def _rollout(slot: int) -> Item:
    await asyncio.sleep(0.01 * (slot + 1))
    return batch(f"e{slot}", slot)


def test_engine_runs_rules_as_results_arrive():
    """Full-batch update: 3 actors, then one learner once all three batches are in."""

    async def main() -> list[str]:
        buffer, log, learned = TriggerBuffer(), [], []
        engine: Engine

        def start_actors(message):
            log.append(f"actors v{message['version']}")
            for slot in range(3):
                engine.start("actor", partial(_rollout, slot),
                             lambda item: buffer.put(TRAJECTORIES, item))

        def learn(message):
            buffer.take(TRAJECTORIES, message["items"])
            log.append(f"learner on {sorted(i.entry for i in message['items'])}")
            engine.start("learner", partial(asyncio.sleep, 0, result=1), learned.append)

        engine = Engine(buffer, [Rule("rollout", ObjectKeyTrigger(POLICY), start_actors),
                                 Rule("update", DataKeyTrigger(n=3), learn)])
        buffer.publish(POLICY, 0)
        await engine.run(finished=lambda: bool(learned))
        return log

    assert asyncio.run(main()) == ["actors v0", "learner on ['e0', 'e1', 'e2']"]


def test_engine_respects_capacity_and_lets_a_kind_run_on():
    """FIFO training with one learner slot: batches queue until the learner is free; actors
    still running when the round ends are left running."""

    async def main() -> tuple[int, int, int]:
        buffer, peak, learned = TriggerBuffer(), [0], []
        engine: Engine

        def learn(message):
            buffer.take(TRAJECTORIES, message["items"])
            engine.start("learner", partial(asyncio.sleep, 0.005), learned.append)
            peak[0] = max(peak[0], engine.running("learner"))

        engine = Engine(buffer, [Rule("gradient", DataKeyTrigger(n=1), learn,
                                      ready=lambda: not engine.running("learner"))])
        for slot in range(4):
            engine.start("actor", partial(_rollout, slot),
                         lambda item: buffer.put(TRAJECTORIES, item))
        engine.start("actor", partial(asyncio.sleep, 5), lambda _: None)  # a slow actor
        await engine.run(finished=lambda: len(learned) == 4)
        still = engine.running("actor")
        await engine.cancel(("actor",))
        return peak[0], still, engine.running("actor")

    assert asyncio.run(main()) == (1, 1, 0)


def test_engine_wakes_for_a_time_trigger_and_reports_a_stall():
    async def main() -> int:
        fired: list[float] = []
        engine = Engine(TriggerBuffer(), [Rule("sync", TimeTrigger(0.02),
                                        lambda m: fired.append(m["elapsed_s"]))])
        await asyncio.wait_for(engine.run(finished=lambda: len(fired) == 3), timeout=2)
        stalled = Engine(TriggerBuffer(), [Rule("update", DataKeyTrigger(n=1), lambda m: None)])
        with pytest.raises(WorkflowStalled):
            await stalled.run(finished=lambda: False)
        return len(fired)

    assert asyncio.run(main()) == 3


def test_a_callback_error_ends_the_run():
    async def main() -> None:
        engine = Engine(TriggerBuffer(), [])

        def fail(_):
            raise RuntimeError("actor slot 0 failed 3 times")

        engine.start("actor", partial(asyncio.sleep, 0), fail)
        await engine.run(finished=lambda: False)

    with pytest.raises(RuntimeError, match="failed 3 times"):
        asyncio.run(main())


# ------------------------------------------------------------------ on a virtual clock
def virtual_engine(cores: int, rules: list[Rule] | None = None) -> Engine:
    """An engine whose invocations last, on the virtual clock, what their result says."""
    clock: VirtualClock[int] = VirtualClock(cores=cores)
    return Engine(TriggerBuffer(), rules or [], VirtualExecutor(clock, lambda start, r: r[1]))


def invocation(name: str, real_s: float, virtual_s: float) -> Callable[[], Awaitable[Any]]:
    async def run() -> tuple[str, float]:
        await asyncio.sleep(real_s)
        return name, virtual_s
    return run


def test_on_a_virtual_clock_callbacks_run_in_virtual_order_not_real_order():
    async def main() -> tuple[list[str], float]:
        engine, seen = virtual_engine(cores=2), []
        engine.start("actor", invocation("slow-virtual", 0.0, 5.0), lambda r: seen.append(r[0]))
        engine.start("actor", invocation("fast-virtual", 0.05, 1.0),
                     lambda r: seen.append(r[0]))
        await engine.run(finished=lambda: len(seen) == 2)
        return seen, engine.now

    assert asyncio.run(main()) == (["fast-virtual", "slow-virtual"], 5.0)


def test_on_a_virtual_clock_work_is_called_at_its_virtual_start():
    """One core: the second invocation's factory runs only once the first ended, so what it
    binds (the version) is what the first one's callback published."""

    async def main() -> list[tuple[str, int]]:
        engine, version, bound = virtual_engine(cores=1), [0], []

        def work(name: str) -> Callable[[], Awaitable[Any]]:
            def start() -> Awaitable[Any]:
                bound.append((name, version[0]))
                return invocation(name, 0.0, 1.0)()
            return start

        def done(_: Any) -> None:
            version[0] += 1

        engine.start("actor", work("a"), done)
        engine.start("actor", work("b"), done)
        await engine.run(finished=lambda: version[0] == 2)
        return bound

    assert asyncio.run(main()) == [("a", 0), ("b", 1)]


def test_a_virtual_call_holds_the_ends_of_other_kinds_for_the_next_wait():
    """A flush awaited with ``call`` while an actor runs: the actor's end, released first,
    reaches its callback at the next wait, not during the call."""

    async def main() -> tuple[list[str], list[str]]:
        engine, seen = virtual_engine(cores=2), []
        engine.start("actor", invocation("actor", 0.0, 1.0), lambda r: seen.append(r[0]))
        flushed = await engine.call("parameter", invocation("flush", 0.0, 2.0))
        during = list(seen)
        await engine.run(finished=lambda: bool(seen))
        return during, [flushed[0], *seen]

    assert asyncio.run(main()) == ([], ["flush", "actor"])


def test_a_virtual_settle_returns_results_and_cancel_frees_the_core():
    async def main() -> tuple[list[Any], int]:
        engine, seen = virtual_engine(cores=1), []
        engine.start("learner", invocation("learner", 10.0, 9.0), seen.append)
        engine.start("actor", invocation("actor", 0.0, 1.0), seen.append)  # waits for the core
        await engine.cancel(("learner",))
        settled = await engine.settle(("actor",))
        return settled, len(seen)

    assert asyncio.run(main()) == ([("actor", 1.0)], 0)


def test_time_triggers_are_refused_on_a_virtual_clock():
    with pytest.raises(ValueError, match="time triggers"):
        virtual_engine(1, [Rule("sync", TimeTrigger(0.02), lambda m: None)])
