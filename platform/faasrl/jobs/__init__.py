"""Training jobs' data: the spec, the records, cost accounting, metrics, checkpoints.

Below the workflows (:mod:`faasrl.workflow`, which run a job) and the manager above them
(:mod:`faasrl.job_manager`): nothing here imports either."""

from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord, JobStore

__all__ = ["JobRecord", "JobSpec", "JobStore"]
