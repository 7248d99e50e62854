"""The Redis a function's container talks to: ``FAASRL_REDIS_URL``, one client per process."""

from __future__ import annotations

import functools
import os

from redis import Redis


@functools.cache
def function_redis() -> Redis:
    return Redis.from_url(os.environ["FAASRL_REDIS_URL"])
