"""The one error a handler raises to say "the caller sent something I cannot take".

Any other exception is the function's own failure (an invocation with ``status: error``). A
handler that raises :class:`InvalidArgs` names the argument at fault; the runtime passes the
name on (``error.field``), and the gateway answers a synchronous REST invoke 400 naming it, as
it does for its own input. Lambda's Invoke API answers it as Lambda does any handler error:
200 with ``X-Amz-Function-Error: Unhandled`` and ``errorType: InvalidArgs``.
"""

from __future__ import annotations

INVALID_ARGS = "InvalidArgs"  # the error's type, as records and the gateway name it


class InvalidArgs(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
