"""Prometheus' scrape, as the caller may see it: every series for the root key, a namespace's
own for anyone else.

A series belongs to a namespace by its ``function`` label (a qualified name) or its ``job``
label (one of the namespace's jobs); series with neither (the node's capacity, memory, stem
cells, record retention) are the node's and everyone's. A namespace's view shows its
functions under their bare names, as the API does.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from faasrl.gateway.services import Services
from faasrl.namespaces import Principal, local_name, owns


class _Scoped:
    """The gateway's collectors seen from one namespace (what ``generate_latest`` reads)."""

    def __init__(self, svc: Services, namespace: str):
        self._svc, self._namespace = svc, namespace
        self._jobs = {rec.id for rec in svc.jobs.running() if rec.namespace == namespace}

    def collect(self) -> Iterator[Metric]:
        for family in self._svc.metrics.collect():
            scoped = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                labels = sample.labels
                if "function" in labels:
                    if not owns(self._namespace, labels["function"]):
                        continue
                    labels = {**labels, "function": local_name(labels["function"])}
                if "job" in labels and labels["job"] not in self._jobs:
                    continue
                scoped.samples.append(sample._replace(labels=labels))
            if scoped.samples or not family.samples:
                yield scoped


def scrape(svc: Services, principal: Principal, all_namespaces: bool) -> bytes:
    """The exposition text: every series when ``all_namespaces`` (root asking for all), else
    the principal's namespace's and the node's."""
    if all_namespaces and principal.root:
        return generate_latest(svc.metrics)
    return generate_latest(_Scoped(svc, principal.namespace))  # type: ignore[arg-type]
