"""What a run costs, serverless next to serverful, from the invocations' billed durations.

Defaults are the seeds' (US East prices): actors billed as Lambda (GB-seconds plus requests),
learners as a share of a p3.2xlarge (its hourly price over the learners one VM holds), and the
serverful baseline as the run's wall time on the VMs a serverful deployment keeps running.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from faasrl.invoker.records import InvocationRecord
from faasrl.user_input import STRICT


class Pricing(BaseModel):
    model_config = STRICT

    lambda_gb_s: float = Field(0.0000166667, ge=0, description="USD per GB-second")
    lambda_request: float = Field(0.20 / 1e6, ge=0, description="USD per request")
    learner_vm_hour: float = Field(3.06, ge=0, description="p3.2xlarge, USD per hour")
    learners_per_vm: int = Field(4, ge=1)
    serverful_vm_hour: float = Field(3.06 + 0.68, ge=0,
                                     description="learner VM + actor VM (c5.4xlarge), USD/hour")


def lambda_cost(seconds: float, memory_mb: int, requests: int, pricing: Pricing) -> float:
    """Lambda's bill: GB-seconds plus requests."""
    return seconds * memory_mb / 1024 * pricing.lambda_gb_s + requests * pricing.lambda_request


def vm_share_cost(seconds: float, pricing: Pricing) -> float:
    """A learner VM's function slot for ``seconds``."""
    return seconds * pricing.learner_vm_hour / pricing.learners_per_vm / 3600


def actor_cost(records: Iterable[InvocationRecord], pricing: Pricing) -> float:
    return sum(lambda_cost(r.billed_ms / 1000, r.memory_mb, 1, pricing) for r in records)


def learner_cost(records: Iterable[InvocationRecord], pricing: Pricing) -> float:
    return sum(vm_share_cost(r.billed_ms / 1000, pricing) for r in records)


def parameter_cost(records: Iterable[InvocationRecord], pricing: Pricing) -> float:
    """The parameter function runs beside the learners on the GPU VM and takes one of its
    function slots, so it is billed like a learner: the VM's price per second over the
    functions the VM holds, times its billed time (the Stellaris cost model)."""
    return learner_cost(records, pricing)


def serverful_cost(wall_s: float, pricing: Pricing) -> float:
    return wall_s * pricing.serverful_vm_hour / 3600
