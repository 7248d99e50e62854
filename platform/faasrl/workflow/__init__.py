"""The buffer-centric core every training job runs on (ARTOS's abstraction).

The stages of an RL algorithm (data collection by actors, data consumption by learners and the
parameter function) are coupled through a **buffer**: the job's data plane in Redis, as the
workflow sees it (:mod:`~faasrl.workflow.trigger_buffer`). **Trigger primitives** bound to it
(:mod:`~faasrl.workflow.triggers`: DataKey, ObjectKey, Time, Transfer) say when the next step
may run; a **workflow** is a few rules (trigger -> action: invoke function X with typed args)
run by the :mod:`~faasrl.workflow.engine`, plus the controller's hook at round boundaries. The
:class:`~faasrl.workflow.job.JobRun` gives every workflow the same start, stop, pause, restore,
checkpoint and metrics-row path.

A job's ``execution`` picks its workflow in :data:`WORKFLOWS`; a new data path (a replay buffer
sampled on a timer, say) is a new workflow module and one line below. Entries are registered by
import path: the job spec takes its ``execution`` names from here without importing the
workflows (which import the job package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from faasrl.registry import Registry

if TYPE_CHECKING:
    from faasrl.workflow.job import JobRun, Workflow


@runtime_checkable
class WorkflowFactory(Protocol):
    """A registered workflow: a class made per job from its run, that names the Protocol of
    :mod:`~faasrl.algorithms.surface` it calls on the job's algorithm module."""

    ALGORITHM_SURFACE: type

    def __call__(self, run: JobRun) -> Workflow: ...


WORKFLOWS: Registry[WorkflowFactory] = Registry("execution")
WORKFLOWS.register("sync", "faasrl.workflow.sync:SyncWorkflow")
WORKFLOWS.register("async", "faasrl.workflow.stellaris:StellarisWorkflow")
WORKFLOWS.register("offpolicy", "faasrl.workflow.offpolicy:OffPolicyWorkflow")

ExecutionName = WORKFLOWS.literal()  # the job spec's ``execution``

__all__ = ["WORKFLOWS", "ExecutionName", "WorkflowFactory"]
