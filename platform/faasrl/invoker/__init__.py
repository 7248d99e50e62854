"""The container pool: pre-warm, keep-alive, cold/warm starts, queueing, capacity; no RL here."""

from faasrl.invoker.errors import InvokerError
from faasrl.invoker.invoker import ContainerInfo, Invoker, InvokerConfig
from faasrl.invoker.pool import Pool, State
from faasrl.invoker.records import InvocationRecord, RecordStore

__all__ = ["ContainerInfo", "InvocationRecord", "Invoker", "InvokerConfig", "InvokerError",
           "Pool", "RecordStore", "State"]
