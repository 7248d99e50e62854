"""How the gateway and the functions connect to Redis.

The gateway connects as the Redis's administrator (the URL it was given, password included). A
function gets ``FAASRL_REDIS_URL`` without any credentials — it names the server, nothing more —
and authenticates as its job's own ACL user, whose name and password travel in the job's
invocation args (``job.redis``; see ``cache/acl.py``). So a function reaches its job's keys and
nothing else, and never sees the gateway's password.

A function's client rides out a short Redis outage (a restart, a container coming back under the
same name): every command is retried on connection errors with exponential back-off for about
24 s before the error reaches the handler (waits of at most 0.5 s, so a client notices soon
that Redis is back).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis.asyncio
from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError
from redis.retry import Retry

# What "Redis is not answering" looks like to a client (AuthenticationError, a ConnectionError,
# is what a job's user sees after a restart, until the gateway has granted it again).
UNREACHABLE = (ConnectionError, TimeoutError, BusyLoadingError)
# The same, by the names a function's failed invocation reports (``type(exc).__name__``).
UNREACHABLE_NAMES = frozenset({"ConnectionError", "TimeoutError", "BusyLoadingError",
                               "AuthenticationError"})
FUNCTION_RETRIES = 50  # with the back-off below: about 24 s before a command gives up


def without_credentials(url: str) -> str:
    """``url`` with any user name and password taken out."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def with_password(url: str, password: str) -> str:
    """``url`` authenticating with ``password`` (as the default user)."""
    parts = urlsplit(without_credentials(url))
    return urlunsplit(parts._replace(netloc=f":{quote(password, safe='')}@{parts.netloc}"))


@functools.lru_cache(maxsize=8)
def _client(url: str, username: str | None, password: str | None) -> Redis:
    return Redis.from_url(
        without_credentials(url), username=username, password=password,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), FUNCTION_RETRIES, UNREACHABLE),
        socket_connect_timeout=5, socket_timeout=60, health_check_interval=10)


def function_redis(job: Mapping[str, Any]) -> Redis:
    """The client a function uses for ``job``: its ACL user at ``FAASRL_REDIS_URL``."""
    creds = job.get("redis") or {}
    return _client(os.environ["FAASRL_REDIS_URL"], creds.get("username"),
                   creds.get("password"))


def gateway_redis(url: str) -> redis.asyncio.Redis:
    """The gateway's client: fails fast while Redis is down (routes answer 503 at once, and the
    job drivers pause), and reconnects by itself when it is back."""
    return redis.asyncio.Redis.from_url(
        url, retry=redis.asyncio.retry.Retry(ExponentialBackoff(cap=0.1, base=0.01), 1,
                                             UNREACHABLE),
        socket_connect_timeout=2, socket_timeout=60)
