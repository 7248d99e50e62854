"""Fractional GPUs through the process backend, on a node told it has one GPU (no CUDA needed:
what is checked is where the pool puts containers and what their processes are given;
tests/gpu checks the memory limit on a real device)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from helpers import gpu_probe

SMALL = {"cpu": 0.5, "memory_mb": 1024}


def test_quarters_share_the_one_device_a_fifth_waits_and_a_whole_gpu_takes_it_after(
        make_platform):
    platform = make_platform(node_gpus=1, node_cpu=4, function_user="")
    with platform.client() as client:
        client.deploy(gpu_probe("quarter", 0.25, **SMALL))
        client.deploy(gpu_probe("whole", 1, **SMALL))
        with ThreadPoolExecutor(5) as pool:
            recs = list(pool.map(lambda _: client.invoke("quarter", {"hold_s": 3}), range(5)))
        out = [r["result"] for r in recs]
        assert len({o["container"] for o in out}) == 4, out
        assert {(o["visible"], o["fraction"]) for o in out} == {("0", "0.25")}
        first_end = min(o["ended"] for o in out)
        assert sum(o["started"] >= first_end - 0.5 for o in out) == 1, out  # it waited
        # A whole GPU: the idle quarters are evicted for it, and it gets no fraction.
        whole = client.invoke("whole", {})["result"]
        assert (whole["visible"], whole["fraction"]) == ("0", None)
        assert not client.cluster()["functions"]["quarter"]["containers"]
