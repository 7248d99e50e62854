"""Prometheus metrics of the invoker: invocations, cold starts, durations and pool sizes."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from faasrl.invoker.pool import Pool, State
from faasrl.invoker.records import InvocationRecord, RecordStore

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
            60, 120, 300)


class InvokerMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.invocations = Counter(
            "faasrl_invocations", "Finished invocations", ["function", "status", "start"],
            registry=registry)
        self.cold_starts = Counter(
            "faasrl_cold_starts", "Invocations that waited for a container start", ["function"],
            registry=registry)
        self.run_seconds = Histogram(
            "faasrl_invocation_run_seconds", "Handler run time", ["function"], buckets=_BUCKETS,
            registry=registry)
        self.queue_seconds = Histogram(
            "faasrl_invocation_queue_seconds", "Request to container assignment", ["function"],
            buckets=_BUCKETS, registry=registry)
        self.start_seconds = Histogram(
            "faasrl_container_start_seconds", "Container start + handler load", ["function"],
            buckets=_BUCKETS, registry=registry)

        # Each metric's child per label values, looked up once: labels() takes a lock and
        # builds a key on every call, half the cost of an observation.
        self._children: dict[tuple[str, ...], tuple[Counter, Histogram, Histogram]] = {}

    def observe(self, rec: InvocationRecord) -> None:
        start = "cold" if rec.cold else "warm"
        key = (rec.function, rec.status, start)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.invocations.labels(*key), self.run_seconds.labels(rec.function),
                self.queue_seconds.labels(rec.function))
        invocations, run_seconds, queue_seconds = children
        invocations.inc()
        run_seconds.observe(rec.run_s)
        queue_seconds.observe(rec.queue_s)
        if rec.cold:
            self.cold_starts.labels(rec.function).inc()

    def observe_start(self, function: str, seconds: float) -> None:
        self.start_seconds.labels(function).observe(seconds)


class PoolCollector(Collector):
    """Pool sizes and capacity, read from the pool at scrape time."""

    def __init__(self, pool: Callable[[], Pool]):
        self._pool = pool

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pool = self._pool()
        containers = GaugeMetricFamily("faasrl_containers", "Containers by state",
                                       labels=["function", "state"])
        tally = Tally((c.function, c.state) for c in pool.containers())
        for spec in pool.functions():
            for state in State:
                containers.add_metric([spec.name, state.value], tally[(spec.name, state)])
        yield containers
        queue = GaugeMetricFamily("faasrl_queue_length", "Invocations waiting for a container",
                                  labels=["function"])
        for spec in pool.functions():
            queue.add_metric([spec.name], pool.queued(spec.name))
        yield queue
        stems = GaugeMetricFamily("faasrl_stem_cells", "Stem cells by image and state",
                                  labels=["image", "state"])
        for image, counts in pool.stem_counts().items():
            for state, n in counts.items():
                stems.add_metric([image, state], n)
        yield stems
        capacity = GaugeMetricFamily("faasrl_capacity", "Node capacity",
                                     labels=["resource", "kind"])
        for kind, res in (("total", pool.capacity), ("reserved", pool.reserved)):
            capacity.add_metric(["cpu", kind], res.cpu)
            capacity.add_metric(["memory_mb", kind], res.memory_mb)
            capacity.add_metric(["gpus", kind], res.gpus)
        yield capacity


class RecordCollector(Collector):
    """What the invocation records cost in Redis and where those past its retention went."""

    def __init__(self, records: Callable[[], RecordStore]):
        self._records = records

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        store = self._records()
        usage = store.usage
        yield GaugeMetricFamily("faasrl_invocation_records_bytes",
                                "What the invocation records in Redis cost it (estimated)",
                                value=usage.bytes)
        yield GaugeMetricFamily("faasrl_invocation_records", "Invocation records in Redis",
                                value=usage.count)
        left = CounterMetricFamily("faasrl_invocation_records_retired",
                                   "Records dropped from Redis by its retention",
                                   labels=["to"])
        left.add_metric(["archive"], usage.archived)
        left.add_metric(["nowhere"], usage.discarded)
        yield left
