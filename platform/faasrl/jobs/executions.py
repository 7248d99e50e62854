"""The workflows a job's ``execution`` names, registered by import path.

The spec (in this package, below the workflows) takes its ``execution`` names from here without
importing the workflows, which import this package; the manager resolves the name to the
workflow class when the job starts. A new data path (a replay buffer sampled on a timer, say)
is a new module in :mod:`faasrl.workflow` and one line below.
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
