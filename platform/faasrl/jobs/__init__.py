"""Training jobs: the spec, the round-by-round driver, cost accounting, metrics, checkpoints."""

from faasrl.jobs.manager import JobManager
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord, JobStore

__all__ = ["JobManager", "JobRecord", "JobSpec", "JobStore"]
