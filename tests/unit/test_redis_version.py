"""The Redis version faasrl needs (per-job ACL users: 6.0), read from INFO's answer."""

from __future__ import annotations

import pytest

from faasrl.data.acl import redis_version_problem

# INFO server's fields as redis-py answers them (values that are not numbers stay strings).
SERVER = {"redis_git_sha1": 0, "redis_build_id": "dff95a8e7a99d269", "redis_mode": "standalone",
          "os": "Linux 6.1.0 x86_64", "tcp_port": 6379}


@pytest.mark.parametrize("version", ["6.0.0", "6.2.14", "7.0.15", "7.4.1", "10.0.0"])
def test_redis_6_and_later_serve(version):
    assert redis_version_problem({**SERVER, "redis_version": version}) is None


def test_valkey_reports_the_redis_version_it_is_compatible_with():
    assert redis_version_problem({**SERVER, "redis_version": "7.2.4",
                                  "valkey_version": "8.0.1"}) is None


@pytest.mark.parametrize("version", ["5.0.14", "4.0.9", "3.2.12"])
def test_an_older_redis_is_refused_naming_the_version_found_and_needed(version):
    problem = redis_version_problem({**SERVER, "redis_version": version})
    assert problem == (f"Redis {version} is too old: faasrl needs Redis 6.0 or later (per-job "
                       "ACL users)")


@pytest.mark.parametrize("info", [SERVER, {**SERVER, "redis_version": "unstable"}])
def test_a_version_that_cannot_be_read_is_refused_saying_so(info):
    problem = redis_version_problem(info)
    assert problem is not None and "no version that faasrl can read" in problem
    assert "Redis 6.0 or later" in problem
