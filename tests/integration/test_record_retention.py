"""Invocation records under sustained load: Redis keeps them within their byte bound, the
archive keeps those past it within its own, and a job running beside them loses nothing."""

from __future__ import annotations

import json

import httpx
import redis
from helpers import assert_rows_whole, finished, pipelined_invocations

from faasrl.data.keys import FUNCTION_INVOCATIONS, INVOCATION_RECORDS, RECORDS_ORDER

INVOCATIONS, CHUNK = 60_000, 5_000
MAX_MB, ARCHIVE_MB = 8, 4
JOB = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
       "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
       "stop": {"max_rounds": 12}}


def record_memory(r: redis.Redis) -> int:
    """What the records take of Redis, as it counts it (MEMORY USAGE): every record's key
    and the lists that index them."""
    keys = list(r.scan_iter(match=f"{INVOCATION_RECORDS}*", count=5000))
    keys += [RECORDS_ORDER, *r.scan_iter(match=f"{FUNCTION_INVOCATIONS}*", count=1000)]
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return sum(n or 0 for n in pipe.execute())


def test_sixty_thousand_invocations_keep_records_within_their_bound_beside_a_job(
        make_platform, redis_url):
    platform = make_platform(register_builtins=True, record_max_mb=MAX_MB,
                             record_archive_mb=ARCHIVE_MB)
    with platform.client() as client:
        client.invoke("echo", {"warm": True})
        client.prewarm("echo", 4)
        job = client.submit(JOB)
        chunks = []
        for _ in range(INVOCATIONS // CHUNK):  # in chunks, so that the first is the oldest
            answers = pipelined_invocations(platform.url, "echo", {"x": 1}, CHUNK)
            assert all(status == 200 for status, _ in answers), \
                next(a for a in answers if a[0] != 200)
            chunks.append([json.loads(body)["id"] for _, body in answers])
        done = finished(client, job["id"], timeout_s=300)
        assert done["status"] == "succeeded", done
        assert_rows_whole(client.job_metrics(job["id"]), 12, env_steps=2 * 2 * 32)

        with redis.Redis.from_url(redis_url) as r:
            used = record_memory(r)
        assert used <= MAX_MB * 1024 * 1024 * 1.1, used
        health = client.health()["records"]
        assert health["archived"] > 0 and health["discarded"] == 0, health

        newest = chunks[-1][-100:]
        assert all(client.invocation(i)["id"] == i for i in newest)
        assert next(r["id"] for r in client.invocations("echo", limit=5)) in chunks[-1]
        # Older chunks: in Redis, else in the archive, else past both bounds: a 404 that
        # says why. Some are read from the archive.
        from_archive = 0
        with redis.Redis.from_url(redis_url) as r:
            for chunk in chunks:
                for i in chunk[::250]:
                    answer = httpx.get(f"{platform.url}/v1/invocations/{i}")
                    if answer.status_code == 200:
                        assert answer.json()["id"] == i
                        from_archive += not r.exists(f"{INVOCATION_RECORDS}{i}")
                    else:
                        assert answer.status_code == 404
                        assert "past its retention" in answer.json()["error"]["message"]
        assert from_archive > 0
        assert all(httpx.get(f"{platform.url}/v1/invocations/{i}").status_code == 404
                   for i in chunks[0][:100])
    archive = sum(f.stat().st_size for f in platform.settings.record_archive_dir.iterdir())
    assert archive <= ARCHIVE_MB * 1024 * 1024 * 1.15, archive
