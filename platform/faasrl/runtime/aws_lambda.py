"""The AWS Lambda entry point: ``python -m awslambdaric faasrl.runtime.aws_lambda.handler``.

A function's Lambda image (``deploy/aws-lambda/``) runs its handler through this module, which
loads it with the local runtime's own loader (``Runtime.init``: the same ``module:function``
import from the working directory, the same init errors) and calls it exactly as a local
container does: ``handler(args, context)`` with the event as ``args`` and the local runtime's
``Context`` (Lambda's request id, function name, memory, deadline). So one handler runs
unchanged on both.

Configuration (the image sets it): ``FAASRL_HANDLER`` (``module:function``), ``FAASRL_FUNCTION``
(its faasrl name), ``FAASRL_CODE_DIR`` (default: the working directory). Per invocation, the
``FAASRL_*`` variables of the ClientContext ``env`` (the platform's Redis URL, sent by the
Lambda backend) are applied before the handler runs; other names are ignored.
"""

from __future__ import annotations

import os
import time
from typing import Any

from faasrl.runtime.server import Context, Runtime

_runtime = Runtime()


class HandlerLoadError(ImportError):
    """The handler could not be imported; Lambda reports it as the INIT phase's error."""


def load() -> Runtime:
    """Import the handler once (during Lambda's INIT phase when imported there)."""
    if _runtime.handler is not None:
        return _runtime
    code_dir = os.environ.get("FAASRL_CODE_DIR")
    if code_dir:
        os.chdir(code_dir)
    handler = os.environ.get("FAASRL_HANDLER", "handler:main")
    status, out = _runtime.init({
        "handler": handler, "function": os.environ.get("FAASRL_FUNCTION", handler),
        "memory_mb": int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0")),
        "concurrency": 1, "env": {}})
    if status != 200:
        err = out["error"]
        raise HandlerLoadError(f"{err['type']}: {err['message']}")
    return _runtime


def _apply_client_env(context: Any) -> None:
    client_context = getattr(context, "client_context", None)
    env = getattr(client_context, "env", None) or {}
    changed = {k: str(v) for k, v in env.items()
               if k.startswith("FAASRL_") and os.environ.get(k) != str(v)}
    if not changed:
        return
    os.environ.update(changed)  # function_redis() reads FAASRL_REDIS_URL at every call


def handler(event: Any, context: Any) -> Any:
    """Lambda's handler: the faasrl handler's result is the invocation's response payload."""
    runtime = load()
    _apply_client_env(context)
    ctx = Context(str(context.aws_request_id), runtime.function,
                  int(context.memory_limit_in_mb),
                  time.monotonic() + context.get_remaining_time_in_millis() / 1000)
    runtime.invocations += 1
    return runtime.handler(event, ctx)


if os.environ.get("AWS_LAMBDA_RUNTIME_API"):  # inside Lambda: load during INIT, not the 1st call
    load()
