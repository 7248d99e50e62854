"""Each job's own Redis ACL user: its functions reach the job's keys and nothing else.

Functions never get the gateway's credentials. A job's driver grants a user named after the job,
whose key pattern is the job's prefix (``faasrl:job:<id>:*``), with the data plane's commands and
none of the dangerous, administrative, scripting or pub/sub ones, nor ``SCAN`` (its answer would
name other jobs' keys). Function registrations, job records, invocation records and uploaded
code live outside every job's prefix, so only the gateway can read or write them.

Redis keeps ACL users in memory only: after a restart they are gone. The driver grants its user
again before every round and whenever Redis comes back (``cache/health.py``); granting is
idempotent. The password is random per driver run and travels in the job's invocation args.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from faasrl.data.keys import (
    SERVING_PASSWORDS,
    job_pattern,
    job_prefix,
    served_pattern,
    serving_password_key,
)

# A served policy's user reads its job's served copies and nothing else (PING: the client's
# health check; AUTH and HELLO need no grant).
SERVING_COMMANDS = ("-@all", "+get", "+ping")
JOB_COMMANDS = ("+@all", "-@dangerous", "-@admin", "-@scripting", "-@pubsub", "-scan",
                "-randomkey")
MIN_REDIS_VERSION = (6, 0)  # ACL users came with Redis 6.0
REDIS_NEEDED = "faasrl needs Redis {}.{} or later (per-job ACL users)".format(*MIN_REDIS_VERSION)


def redis_version_problem(info: Mapping[str, Any]) -> str | None:
    """Why the Redis whose ``INFO server`` answer is ``info`` cannot serve faasrl, naming the
    version found and the one needed; None when it can."""
    found = str(info.get("redis_version", "")).strip()
    match = re.match(r"(\d+)\.(\d+)", found)
    if match is None:
        return f"Redis reports no version that faasrl can read ({found or 'none'}): {REDIS_NEEDED}"
    if (int(match[1]), int(match[2])) < MIN_REDIS_VERSION:
        return f"Redis {found} is too old: {REDIS_NEEDED}"
    return None


@dataclass(frozen=True)
class JobCredentials:
    username: str
    password: str

    @classmethod
    def new(cls, job_id: str) -> JobCredentials:
        return cls(job_user(job_id), secrets.token_urlsafe(24))

    def to_args(self) -> dict[str, str]:
        """As functions receive them (``job.redis`` in their args)."""
        return {"username": self.username, "password": self.password}


def job_user(job_id: str) -> str:
    job_prefix(job_id)  # the id's check
    return f"faasrl-job-{job_id}"


async def grant(redis: Redis, job_id: str, creds: JobCredentials) -> None:
    """Create or reset the job's user: on, this password only, the job's keys only."""
    await redis.execute_command("ACL", "SETUSER", creds.username, "reset", "on",
                                f">{creds.password}", f"~{job_pattern(job_id)}", *JOB_COMMANDS)


def grant_new(admin_url: str, job_id: str) -> dict[str, str]:
    """A new user for ``job_id``, granted as a job's driver grants one, and what the driver
    hands its functions: for invoking functions outside a job (tests, benchmarks)."""
    import asyncio

    from faasrl.data.connection import gateway_redis

    creds = JobCredentials.new(job_id)

    async def go() -> None:
        r = gateway_redis(admin_url)
        try:
            await grant(r, job_id, creds)
        finally:
            await r.aclose()

    asyncio.run(go())
    return creds.to_args()


async def revoke(redis: Redis, job_id: str) -> None:
    """Delete the job's user (Redis disconnects its clients)."""
    await redis.execute_command("ACL", "DELUSER", job_user(job_id))


def serving_user(job_id: str) -> str:
    """The user a job's policy functions read its served weights as (one per job, whatever
    the function and version: a published function version keeps working)."""
    job_prefix(job_id)
    return f"faasrl-serve-{job_id}"


async def grant_serving(redis: Redis, job_id: str) -> JobCredentials:
    """The job's serving user, made on its first policy function (its password kept in
    Redis, outside the job's prefix) and granted again as it was: GET on the job's served
    copies only."""
    key = serving_password_key(job_id)
    await redis.set(key, secrets.token_urlsafe(24), nx=True)
    password = (await redis.get(key)).decode()
    creds = JobCredentials(serving_user(job_id), password)
    await _set_serving(redis, job_id, creds)
    return creds


async def _set_serving(redis: Redis, job_id: str, creds: JobCredentials) -> None:
    await redis.execute_command("ACL", "SETUSER", creds.username, "reset", "on",
                                f">{creds.password}", f"~{served_pattern(job_id)}",
                                *SERVING_COMMANDS)


async def regrant_serving(redis: Redis) -> None:
    """Grant every serving user again (Redis forgets ACL users when it restarts)."""
    async for key in redis.scan_iter(match=SERVING_PASSWORDS + "*", count=500):
        job_id = key.decode()[len(SERVING_PASSWORDS):]
        password = await redis.get(key)
        if password is not None:
            await _set_serving(redis, job_id, JobCredentials(serving_user(job_id),
                                                             password.decode()))


async def revoke_serving(redis: Redis, job_id: str) -> None:
    """Delete the job's serving user and its password (the job is deleted)."""
    await redis.execute_command("ACL", "DELUSER", serving_user(job_id))
    await redis.delete(serving_password_key(job_id))
