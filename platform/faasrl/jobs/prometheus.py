"""Prometheus gauges of the jobs running now, next to the invoker's platform metrics.

Read from the runs' live records at scrape time, like the invoker's pool gauges: nothing is
kept between scrapes, so a job that ends is gone from the next one, and Prometheus marks its
series stale. Labelled by job id; ``faasrl_job_info`` maps an id to its algorithm, env and
controller, so the value gauges stay one series per job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from faasrl.jobs.store import JobRecord
from faasrl.round_row import COLUMNS, RECENT_MEAN_RETURN

# name, help, the record's value (None: not measured yet, left out)
GAUGES: tuple[tuple[str, str, Callable[[JobRecord], float | None]], ...] = (
    ("faasrl_job_round", "Rounds the job completed", lambda r: r.round),
    ("faasrl_job_env_steps", "Env steps the job's actors took", lambda r: r.env_steps),
    ("faasrl_job_env_restarts", "Actor slots whose envs started afresh mid-job (episodes "
     "cut short: a container died or was reclaimed)", lambda r: r.env_restarts),
    ("faasrl_job_return", COLUMNS[RECENT_MEAN_RETURN].description.capitalize(),
     lambda r: r.recent_mean_return),
    ("faasrl_job_cost_usd", "Serverless cost of the job so far (actors and learner)",
     lambda r: r.cost_usd),
)


class JobCollector(Collector):
    def __init__(self, running: Callable[[], list[JobRecord]]):
        self._running = running

    def collect(self) -> Iterator[GaugeMetricFamily]:
        records = self._running()
        info = GaugeMetricFamily("faasrl_job_info", "A running job's algorithm, env and "
                                 "controller", labels=["job", "algorithm", "env_id", "controller"])
        for rec in records:
            info.add_metric([rec.id, rec.spec.algorithm, rec.spec.env_id,
                             rec.spec.controller.name], 1)
        yield info
        for name, doc, value in GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=["job"])
            for rec in records:
                if (v := value(rec)) is not None:
                    gauge.add_metric([rec.id], float(v))
            yield gauge
