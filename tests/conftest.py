"""Shared fixtures: one real Redis per session, real platforms on temporary state dirs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.redis_server import EmbeddedRedis


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("FAASRL_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """The session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    return redis_server.url


@pytest.fixture
def make_platform(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., EmbeddedPlatform]]:
    started: list[EmbeddedPlatform] = []

    def start(**overrides: Any) -> EmbeddedPlatform:
        # Built-in functions (actor, learner, echo) only where a test asks for them.
        values: dict[str, Any] = {"state_dir": tmp_path / "state", "port": 0,
                                  "redis_url": redis_url, "maintain_interval_s": 0.05,
                                  "register_builtins": False}
        values.update(overrides)
        platform = EmbeddedPlatform(Settings(**values)).start()
        started.append(platform)
        return platform

    yield start
    for platform in started:
        platform.stop()


@pytest.fixture
def platform(make_platform: Callable[..., EmbeddedPlatform]) -> EmbeddedPlatform:
    return make_platform()


@pytest.fixture
def client(platform: EmbeddedPlatform):
    with platform.client() as c:
        yield c
