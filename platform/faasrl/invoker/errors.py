"""Why the invoker refused or could not serve an invocation; ``status`` is the HTTP status."""

from __future__ import annotations


class InvokerError(Exception):
    status = 500
    retry_after_s = 1  # what a 429 or 503 tells the client to wait

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    @property
    def kind(self) -> str:
        return type(self).__name__


class FunctionNotFound(InvokerError):
    status = 404


class CapacityError(InvokerError):
    """The function needs more than the whole node has, so it could never start."""

    status = 422


class NotPlaceable(InvokerError):
    """The invocation asks for a placement the function or the platform does not have."""

    status = 422


class QueueFull(InvokerError):
    status = 429


class QuotaExceeded(InvokerError):
    """A namespace's quota or a function's concurrency bound kept the invocation out until its
    queue timeout (or it could never fit); the message names the quota."""

    status = 429
    retry_after_s = 5  # quotas free as invocations end: seconds, not the 1 s of a full queue

    def __init__(self, message: str, waited: bool = False):
        super().__init__(message)
        self.waited = waited  # it waited its queue timeout (else: it could never fit)


class QueueTimeout(InvokerError):
    status = 503


class FunctionGone(InvokerError):
    """The function was deleted while the invocation waited."""

    status = 410


class StartFailed(InvokerError):
    """A container could not be started or its handler not loaded (``kind`` says which)."""

    status = 502

    def __init__(self, message: str, kind: str = "StartError"):
        super().__init__(message)
        self._kind = kind

    @property
    def kind(self) -> str:
        return self._kind
