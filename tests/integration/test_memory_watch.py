"""The gateway's watch on memory: what it reports, and what it sheds near the limit."""

from __future__ import annotations

import httpx
from helpers import fn

from faasrl.gateway.memory import RETRY_AFTER_S, MemoryReading, node_memory


def test_a_gateway_near_its_memory_limit_sheds_what_can_wait_and_says_so(make_platform):
    # Any node uses more than 0.1 % of its memory: this gateway is past its limit from the start.
    platform = make_platform(memory_shed_at=0.001)
    with platform.client() as client:
        client.deploy(fn("t"))
        health = client.health()
        assert health["memory"]["state"] == "shedding" and health["status"] == "ok"
        assert health["memory"]["shares"]["node"] > 0.001
        base = platform.url
        refused = [httpx.post(f"{base}/v1/functions/t/invoke", params={"mode": "async"},
                              json={"args": 1}),
                   httpx.post(f"{base}/v1/functions/t/prewarm", json={"count": 1})]
        for answer in refused:
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"] == str(RETRY_AFTER_S)
            assert answer.json()["error"]["type"] == "MemoryPressure"
            assert "memory is near its limit" in answer.json()["error"]["message"]
        assert client.invoke("t", 1)["status"] == "success"  # a client that waits is served
        assert "faasrl_memory_shedding 1.0" in client.metrics()
        assert client.health()["records"]["archive"]["writing"] is False


def test_a_gateway_with_memory_to_spare_reports_it_and_sheds_nothing(make_platform):
    platform = make_platform()
    with platform.client() as client:
        client.deploy(fn("t"))
        memory = client.health()["memory"]
        assert memory["state"] == "ok" and memory["redis_used_mb"] > 0
        assert 0 < memory["node_available_mb"] < memory["node_total_mb"]
        assert client.invoke_async("t", 1)
        metrics = client.metrics()
        assert "faasrl_memory_shedding 0.0" in metrics
        assert "faasrl_redis_used_memory_bytes" in metrics
        assert "faasrl_invocation_records_bytes" in metrics


def test_node_memory_reads_meminfo_and_shares_take_the_limits_there_are(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       1000 kB\nMemFree:         100 kB\n"
                       "MemAvailable:    250 kB\n")
    assert node_memory(meminfo) == (1000 * 1024, 250 * 1024)
    assert node_memory(tmp_path / "none") == (0, 0)
    assert MemoryReading(90, 100, 1000, 250).shares == {"redis": 0.9, "node": 0.75}
    assert MemoryReading(90, 0, 0, 0).shares == {}  # no maxmemory, no meminfo: nothing to shed


def test_a_lambda_event_is_throttled_as_lambda_throttles_while_memory_is_short(make_platform):
    platform = make_platform(memory_shed_at=0.001)
    with platform.client() as client:
        client.deploy(fn("t"))
    answer = httpx.post(f"{platform.url}/2015-03-31/functions/t/invocations",
                        headers={"X-Amz-Invocation-Type": "Event"}, content=b"{}")
    assert answer.status_code == 429  # what an AWS SDK retries, after Retry-After
    assert answer.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert answer.headers["x-amzn-ErrorType"] == "TooManyRequestsException"
