"""The buffer-centric core every training job runs on (ARTOS's abstraction).

The stages of an RL algorithm (data collection by actors, data consumption by learners and the
parameter function) are coupled through a **buffer**: the job's data plane in Redis, as the
workflow sees it (:mod:`~faasrl.workflow.trigger_buffer`). **Trigger primitives** bound to it
(:mod:`~faasrl.workflow.triggers`: DataKey, ObjectKey, Time, Transfer) say when the next step
may run; a **workflow** is a few rules (trigger -> action: invoke function X with typed args)
run by the :mod:`~faasrl.workflow.engine`, plus the controller's hook at round boundaries. The
:class:`~faasrl.workflow.job.JobRun` gives every workflow the same start, stop, pause, restore,
checkpoint and metrics-row path.

A job's ``execution`` picks its workflow in :data:`faasrl.jobs.executions.WORKFLOWS`. This
package sits between the job's data (:mod:`faasrl.jobs`, which it imports) and the manager
(:mod:`faasrl.job_manager`, which imports it).
"""
