"""The buffer-centric core every training job runs on (ARTOS's abstraction).

The stages of an RL algorithm (data collection by actors, data consumption by learners and the
parameter function) are coupled through a **buffer**: the job's data plane in Redis, as the
workflow sees it (:mod:`~faasrl.workflow.buffer`). **Trigger primitives** bound to it
(:mod:`~faasrl.workflow.triggers`: DataKey, ObjectKey, Time, Transfer) say when the next step
may run; a **workflow** is a few rules (trigger -> action: invoke function X with typed args)
run by the :mod:`~faasrl.workflow.engine`, plus the controller's hook at round boundaries. The
:class:`~faasrl.workflow.job.JobRun` gives every workflow the same start, stop, pause, restore,
checkpoint and metrics-row path.

A job's ``execution`` picks its workflow here; a new data path (a replay buffer sampled on a
timer, say) is a new workflow module and one line below.
"""

from __future__ import annotations

from collections.abc import Callable

from faasrl.workflow.job import JobRun, Workflow
from faasrl.workflow.offpolicy import OffPolicyWorkflow
from faasrl.workflow.stellaris import StellarisWorkflow
from faasrl.workflow.sync import SyncWorkflow

WORKFLOWS: dict[str, Callable[[JobRun], Workflow]] = {
    "sync": SyncWorkflow,  # rounds of I_k actors, then one learner update (PPO)
    "async": StellarisWorkflow,  # continuous actors, FIFO learners, staleness-aware aggregation
    "offpolicy": OffPolicyWorkflow,  # continuous actors, a replay-buffer function (DQN, SAC)
}

__all__ = ["WORKFLOWS", "JobRun", "Workflow"]
