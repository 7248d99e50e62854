"""Kept-alive connections: the gateway keeps an idle one open longer than clients' own idle
timeout (httpx's 5 s), on the invoke shortcut as on every other route."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

from helpers import fn

from faasrl.embedded import KEEP_ALIVE_S

CLIENT_IDLE_S = 5.0  # httpx's keepalive_expiry: it reuses a connection idle up to this long


def test_an_idle_connection_outlives_a_clients_idle_timeout(client, platform):
    assert KEEP_ALIVE_S >= 2 * CLIENT_IDLE_S
    client.deploy(fn("t"))
    url = urlsplit(platform.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if platform.token:
        headers["Authorization"] = f"Bearer {platform.token}"

    def invoke() -> dict:  # the shortcut's path: a plain synchronous invoke
        conn.request("POST", "/v1/functions/t/invoke", body=json.dumps({"args": 1}),
                     headers=headers)
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("connection") != "close"
        return json.loads(response.read())

    try:
        assert invoke()["status"] == "success"
        local = conn.sock.getsockname()
        time.sleep(CLIENT_IDLE_S + 0.5)  # as long as a client may keep it idle, and a little
        assert invoke()["status"] == "success"  # at uvicorn's 5 s: RemoteDisconnected
        conn.request("GET", "/healthz")  # a route of the app behind the shortcut
        assert conn.getresponse().read() and conn.sock.getsockname() == local  # reused
    finally:
        conn.close()
