"""What the dashboard reads besides the pages: its files (served without auth, as they hold no
data), the charting library from the installed plotly, and the figures the API added for it
(a function's recent invocations summed up, invocations by status). Real platform, real HTTP."""

from __future__ import annotations

import httpx
from helpers import fn, wait_for

from faasrl.client import Client
from faasrl.gateway.ui import STATIC
from faasrl.invoker import records


def test_the_root_leads_to_the_dashboard_whose_files_need_no_token(make_platform):
    platform = make_platform(token="s3cret")
    with httpx.Client(base_url=platform.url) as http:
        for path in ("/", "/ui"):
            resp = http.get(path)
            assert resp.status_code == 307 and resp.headers["location"] == "ui/", path
        page = http.get("/", follow_redirects=True)
        assert str(page.url) == f"{platform.url}/ui/" and page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert '<script type="module" src="static/app.js">' in page.text
        for name in sorted(p.name for p in STATIC.iterdir()):
            assert http.get(f"/ui/static/{name}").status_code == 200, name
        plotly = http.get("/ui/vendor/plotly.min.js")
        assert plotly.status_code == 200 and "javascript" in plotly.headers["content-type"]
        assert len(plotly.content) > 1_000_000 and b"plotly.js" in plotly.content[:500]
        assert http.get("/ui/static/%2e%2e/%2e%2e/openapi.json").status_code == 404
        assert http.get("/v1/cluster").status_code == 401  # the data stays behind the token


def test_function_stats_sum_up_its_recent_invocations(client: Client, platform):
    client.deploy(fn("t"))
    client.deploy(fn("boom", "fns:boom"))
    runs = [client.invoke("t", {"x": i}) for i in range(4)]
    assert client.invoke("boom")["status"] == "error"
    # records reach Redis just after the answer (written behind the hot path)
    wait_for(lambda: client.function_stats("boom")["invocations"], what="boom's record")
    stats = wait_for(lambda: (s := client.function_stats("t"))["invocations"] == 4 and s,
                     what="t's records")
    assert (stats["invocations"], stats["cold"], stats["warm"]) == (4, 1, 3)
    assert (stats["errors"], stats["timeouts"], stats["queued"]) == (0, 0, 0)
    run_s = sorted(r["run_s"] for r in runs)
    assert (stats["run_p50_s"], stats["run_p99_s"]) == (run_s[1], run_s[3])  # nearest rank
    assert stats["billed_ms"] == sum(r["billed_ms"] for r in runs)
    assert stats["containers"] == {"starting": 0, "idle": 1, "busy": 0, "stopping": 0}
    assert client.function_stats("t", window=1)["invocations"] == 1
    boom = client.function_stats("boom")
    assert (boom["invocations"], boom["errors"], boom["cold"]) == (1, 1, 1)
    client.deploy(fn("idle"))
    assert client.function_stats("idle")["run_p50_s"] is None  # nothing to sum up yet
    with httpx.Client(base_url=platform.url) as http:
        assert http.get("/v1/functions/nope/stats").status_code == 404
        bad = http.get("/v1/functions/t/stats", params={"window": 0})
        assert bad.status_code == 422 and "window" in bad.json()["error"]["fields"]


def test_invocations_filter_by_how_they_ended(client: Client, platform, monkeypatch):
    # A page of one record at a time: the filter reads pages until it has enough.
    monkeypatch.setattr(records, "MATCH_PAGE", 1)
    client.deploy(fn("t"))
    client.deploy(fn("boom", "fns:boom"))
    ok = [client.invoke("t")["id"] for _ in range(3)]
    failed = client.invoke("boom")["id"]
    wait_for(lambda: len(client.invocations()) == 4, what="the records")
    assert [r["id"] for r in client.invocations(status="error")] == [failed]
    assert {r["id"] for r in client.invocations(status="success")} == set(ok)
    assert [r["id"] for r in client.invocations("t", limit=1, status="success")] == [ok[-1]]
    assert client.invocations("boom", status="success") == []
    bad = httpx.get(f"{platform.url}/v1/invocations", params={"status": "fine"})
    assert bad.status_code == 422 and "status" in bad.json()["error"]["fields"]
