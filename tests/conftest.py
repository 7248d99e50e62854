"""Shared fixtures: one real Redis per session, real platforms on temporary state dirs, the
Docker engine."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import CORRIDOR_MODULES, TEST_NETWORK, Platforms, build_wheelhouse

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.redis_server import EmbeddedRedis


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("FAASRL_"):
            monkeypatch.delenv(key)


@pytest.fixture
def env_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process as a fresh function container for envs brought as code: nothing
    installed, its temp dir ``tmp_path``; the test envs' modules, path entries and gymnasium
    ids go afterwards."""
    import gymnasium as gym

    from faasrl.rl import env_loader as loader

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(loader, "_folders", {})
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [m for m in sys.modules if m.partition(".")[0] in CORRIDOR_MODULES]:
        del sys.modules[name]
    gym.registry.pop("MyCorridor-v0", None)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local package index (``helpers.build_wheelhouse``), built once per session."""
    return build_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture
def pip_index(wheelhouse: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip, during this test, installs from the wheelhouse alone (no network)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    return wheelhouse


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
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_url) as client:
        yield client


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
def platforms() -> Iterator[Platforms]:
    """Starts ``faasrl up`` processes; stops every one after the test, passed or failed."""
    with Platforms() as started:
        yield started


@pytest.fixture
def platform(make_platform: Callable[..., EmbeddedPlatform],
             request: pytest.FixtureRequest) -> EmbeddedPlatform:
    """A platform with the settings in the test module's ``PLATFORM`` (e.g.
    ``{"register_builtins": True}`` for the built-in actor and learner), else the defaults."""
    return make_platform(**getattr(request.module, "PLATFORM", {}))


@pytest.fixture
def client(platform: EmbeddedPlatform):
    with platform.client() as c:
        yield c


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The Docker engine's client; a test that needs it is skipped, saying why, where there is
    none. Removes the tests' network at the end (left alone while still in use)."""
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # no socket, no permission, no daemon: all mean no engine here
        pytest.skip(f"no Docker engine reachable ({exc}); run 'make docker-engine'")
    yield client
    for network in client.networks.list(names=[TEST_NETWORK]):
        with contextlib.suppress(docker.errors.APIError):
            network.remove()
    client.close()
