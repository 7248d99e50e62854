"""A whole platform in this process: embedded Redis (unless a URL is set) and the gateway.

``faasrl up`` runs one in the foreground; ``make run``, the tests and the benchmarks start one in
the background. The gateway serves on its own thread (so this thread stays free for a client),
and one lock per state dir keeps two platforms from sharing the same Redis data and pid records.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import redis
import uvicorn
from fastapi import FastAPI

from faasrl.client import Client, gateway_file
from faasrl.config import Settings
from faasrl.data.acl import REDIS_NEEDED, redis_version_problem
from faasrl.data.connection import with_password, without_credentials
from faasrl.gateway import create_app
from faasrl.gateway.fast_invoke import FastInvoke
from faasrl.redis_server import EmbeddedRedis

log = logging.getLogger(__name__)
# How long the gateway keeps an idle client connection open: clearly longer than clients' own
# idle timeouts (httpx's 5 s, aiohttp's 15 s), so that the client, not the server, ends an idle
# connection. At uvicorn's default (5 s, equal to httpx's) a client reusing a connection just
# as the server closed it got "Server disconnected without sending a response".
KEEP_ALIVE_S = 75


class PlatformError(RuntimeError):
    pass


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole: written beside it (mode 0600 from its creation: it
    holds the token) and renamed over it, so a reader (a CLI looking for the gateway) sees the
    old file or the new one, never an empty or partial one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class EmbeddedPlatform:
    def __init__(self, settings: Settings | None = None, *, access_log: bool = False):
        self.settings = settings or Settings()
        self.redis: EmbeddedRedis | None = None
        self.redis_url = self._external_redis_url()
        self.url = ""
        self._access_log = access_log
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._lock: IO[str] | None = None
        self._app: FastAPI | None = None

    @property
    def token(self) -> str | None:
        return self.settings.token.get_secret_value() if self.settings.token else None

    def _external_redis_url(self) -> str | None:
        """``redis_url``, with the password from ``redis_password_file`` when one is given."""
        url, secret = self.settings.redis_url, self.settings.redis_password_file
        if url is None or secret is None:
            return url
        return with_password(url, secret.read_text().strip())

    def start(self, timeout_s: float = 60.0) -> EmbeddedPlatform:
        state = self.settings.state_dir
        state.mkdir(parents=True, exist_ok=True)
        state.chmod(0o700)  # logs, pids, Redis data, the token: the gateway's alone
        self._take_lock(state)
        try:
            if self.redis_url is None:
                self.redis = self._embedded_redis(state / "redis").start()
                self.redis_url = self.redis.url
            self._check_redis(self.redis_url)
            self._serve(timeout_s)
        except BaseException:
            self.stop()
            raise
        _write_private(gateway_file(state),
                       json.dumps({"url": self.url, "token": self.token, "pid": os.getpid()}))
        return self

    def _embedded_redis(self, data_dir: Path) -> EmbeddedRedis:
        """Supervised, with a password (the gateway's alone: functions authenticate as their
        job's ACL user), on loopback, and where containers must reach it also on the Docker
        bridge, where ``host-gateway`` leads."""
        also_bind: tuple[str, ...] = ()
        if self.settings.backend == "docker":
            from faasrl.backends.docker import host_gateway_address

            also_bind = (host_gateway_address(),)
        return EmbeddedRedis(data_dir, also_bind=also_bind, password=secrets.token_urlsafe(24),
                             supervise=True)

    @staticmethod
    def _check_redis(url: str) -> None:
        """Refuse to start on a Redis that cannot serve faasrl (too old for ACL users), or that
        does not answer, saying why; a Redis that keeps INFO from us is given the benefit of the
        doubt."""
        client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)
        try:
            info = client.info("server")
        except redis.ConnectionError as exc:
            raise PlatformError(f"cannot reach Redis at {without_credentials(url)}: {exc}") \
                from None
        except redis.ResponseError as exc:  # INFO renamed or not allowed
            log.warning("could not read the version of the Redis at %s (%s); %s",
                        without_credentials(url), exc, REDIS_NEEDED)
            return
        finally:
            client.close()
        if (problem := redis_version_problem(info)) is not None:
            raise PlatformError(f"{problem} (the Redis at {without_credentials(url)})")

    def _take_lock(self, state: Path) -> None:
        lock = open(state / "platform.lock", "a+")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise PlatformError(f"another faasrl platform is running on {state}; stop it or "
                                "set FAASRL_STATE_DIR to another folder") from None
        self._lock = lock

    def _serve(self, timeout_s: float) -> None:
        assert self.redis_url is not None
        function_url = without_credentials(self.redis_url)
        if self.redis is not None and self.settings.backend == "docker":
            from faasrl.backends.docker import HOST_ALIAS

            function_url = without_credentials(self.redis.url_for(HOST_ALIAS))
        app = create_app(self.settings, self.redis_url, function_url)
        config = uvicorn.Config(FastInvoke(app), host=self.settings.host, port=self.settings.port,
                                loop="uvloop", http="httptools", lifespan="on",
                                log_level="warning", access_log=self._access_log,
                                proxy_headers=False, server_header=False,
                                timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=5)
        self._app = app
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name="faasrl-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive():
                raise PlatformError("the gateway failed to start (see the log above)")
            if time.monotonic() > deadline:
                raise PlatformError(f"the gateway did not start within {timeout_s:g} s")
            time.sleep(0.01)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"

    def client(self) -> Client:
        return Client(self.url, self.token)

    def wait(self) -> None:
        """Block until the gateway stops; a signal's KeyboardInterrupt ends the wait.

        Sleeps rather than ``join``s: a ``join`` interrupted by KeyboardInterrupt leaves the
        thread looking finished (CPython 3.11), and ``stop`` would then not wait for the
        gateway to stop its containers.
        """
        while self._thread is not None and self._thread.is_alive():
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the gateway (and with it every container), then Redis."""
        if self._server is not None and self._thread is not None and self._app is not None:
            self._app.state.closing = True  # ends event streams, so connections can close
            self._server.should_exit = True
            self._thread.join()
        self._server = self._thread = None
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
            self.redis_url = self._external_redis_url()
        if self._lock is not None:
            gateway_file(self.settings.state_dir).unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> EmbeddedPlatform:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
