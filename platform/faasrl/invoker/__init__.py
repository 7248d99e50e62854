"""The container pool: pre-warm, keep-alive, cold/warm starts, queueing, capacity; no RL here."""

from faasrl.invoker.errors import InvokerError
from faasrl.invoker.invoker import Invoker, InvokerConfig
from faasrl.invoker.pool import Pool
from faasrl.invoker.records import InvocationRecord, RecordStore
from faasrl.invoker.resources import Resources, node_capacity

__all__ = ["InvocationRecord", "Invoker", "InvokerConfig", "InvokerError", "Pool",
           "RecordStore", "Resources", "node_capacity"]
