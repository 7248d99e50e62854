"""The AWS Lambda backend: invocations of functions placed on Lambda go out through boto3.

Each invocation is one synchronous ``lambda.invoke`` (``RequestResponse``, ``LogType=Tail``) on a
thread pool that grows to the number of invocations in flight (a training round's actor count;
``prewarm`` sizes it ahead), up to ``max_concurrency``. The function's arguments are the event,
its result the response payload, exactly what ``boto3.client("lambda").invoke`` sends and gets,
so the same function can be a faasrl function or a Lambda function.

What is billed comes from the ``REPORT`` line of the tail log (``Billed Duration``, ``Memory
Size``, ``Init Duration`` for a cold start), as AWS bills it; a Lambda-compatible endpoint that
sends no log is billed the measured round trip.

Errors map onto the invoker's model: a handler's error (``X-Amz-Function-Error``) is an ``error``
record with Lambda's ``errorType``/``errorMessage``/``stackTrace``; ``Task timed out`` (or no
answer within the function's timeout) is a ``timeout``; throttling (429) is retried with
exponential back-off ``throttle_retries`` times; a 5xx or a broken connection is retried once,
as a container that died is; everything else is an ``error`` with the service's error code.

Functions on Lambda get the platform's runtime environment (``FAASRL_REDIS_URL``: the Redis they
reach, password and TLS included in the URL) in the invocation's ClientContext ``env``, which the
Lambda entry point (``faasrl.runtime.aws_lambda``) applies before the handler runs: the
equivalent of the environment a local container gets at ``/init``. It is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from faasrl.backends.service import Outcome, ServiceBackend
from faasrl.data.connection import without_credentials
from faasrl.manifest import FunctionSpec, LambdaTarget, NotOnLambda

if TYPE_CHECKING:
    from faasrl.config import Settings

log = logging.getLogger(__name__)

THROTTLED = {"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException"}
CLIENT_CONTEXT_MAX = 3583  # bytes of base64, Lambda's limit
READ_TIMEOUT_S = 905.0  # Lambda's longest timeout (900 s) and a margin: the invoker's deadline
#                         is what ends a wait; this only ends a connection nobody waits on
_REPORT_FIELD = re.compile(
    r"(?:^|\t)\s*(Billed Duration|Init Duration|Duration|Memory Size|Max Memory Used):"
    r" ([0-9.]+)")


# Lines of a tail log that Lambda writes, not the function.
_FRAMING = ("START RequestId:", "END RequestId:", "REPORT RequestId:", "INIT_START ")


def function_output(log_tail: str) -> str:
    """What the function wrote, of a Lambda tail log: its lines less Lambda's own."""
    return "".join(line for line in log_tail.splitlines(keepends=True)
                   if not line.startswith(_FRAMING))


def parse_report(log_tail: str) -> dict[str, float]:
    """The fields of the last ``REPORT`` line of a Lambda tail log (ms, MB)."""
    for line in reversed(log_tail.splitlines()):
        if line.startswith("REPORT "):
            return {k: float(v) for k, v in _REPORT_FIELD.findall(line)}
    return {}


def client_context(env: Mapping[str, str]) -> str | None:
    """The ClientContext header value carrying ``env`` (None when empty)."""
    if not env:
        return None
    value = base64.b64encode(json.dumps({"env": dict(env)}).encode()).decode()
    if len(value) > CLIENT_CONTEXT_MAX:
        raise ValueError(f"the runtime environment for Lambda functions is {len(value)} bytes "
                         f"encoded; Lambda's ClientContext takes {CLIENT_CONTEXT_MAX}")
    return value


class LambdaBackend(ServiceBackend):
    name = "lambda"

    @classmethod
    def from_settings(cls, settings: Settings, redis_url: str) -> LambdaBackend:
        """Its functions reach Redis at ``lambda_redis_url`` (default ``redis_url``), without
        credentials like every function: they authenticate as their job's user."""
        lambda_redis = settings.lambda_redis_url.get_secret_value() if settings.lambda_redis_url \
            else redis_url
        return cls(runtime_env={"FAASRL_REDIS_URL": without_credentials(lambda_redis)},
                   max_concurrency=settings.lambda_max_concurrency,
                   throttle_retries=settings.lambda_throttle_retries,
                   timeout_grace_s=settings.timeout_grace_s)

    def __init__(self, *, runtime_env: Mapping[str, str] | None = None,
                 max_concurrency: int = 256, throttle_retries: int = 4,
                 timeout_grace_s: float = 1.0):
        self._context = client_context(runtime_env or {})
        self.max_concurrency = max_concurrency
        self.throttle_retries = throttle_retries
        self.timeout_grace_s = timeout_grace_s
        self._clients: dict[tuple[str | None, str | None], Any] = {}
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._workers = 0
        self._busy = 0  # threads blocked in a call, including ones nobody waits on any more

    # ------------------------------------------------------------------ sizing
    def prewarm(self, spec: FunctionSpec, n: int) -> None:
        if spec.aws_lambda is None or n <= 0:
            return
        self._ensure_workers(n)
        assert self._executor is not None
        self._executor.submit(self._client_or_none, spec.aws_lambda)

    def _ensure_workers(self, n: int) -> None:
        n = min(max(n, 1), self.max_concurrency)
        if n <= self._workers:
            return
        old, self._workers = self._executor, n
        self._executor = ThreadPoolExecutor(n, thread_name_prefix="lambda-invoke")
        if old is not None:
            old.shutdown(wait=False)  # what runs there finishes; new calls go to the new pool

    def _client(self, target: LambdaTarget) -> Any:
        key = (target.region, target.endpoint_url)
        with self._lock:  # sessions are not thread-safe; the clients they make are
            if key not in self._clients:
                config = Config(retries={"total_max_attempts": 1}, read_timeout=READ_TIMEOUT_S,
                                connect_timeout=10, max_pool_connections=self.max_concurrency,
                                tcp_keepalive=True)
                self._clients[key] = boto3.session.Session().client(
                    "lambda", region_name=target.region, endpoint_url=target.endpoint_url,
                    config=config)
            return self._clients[key]

    def _client_or_none(self, target: LambdaTarget) -> None:
        try:
            self._client(target)
        except BotoCoreError as exc:  # reported by the first invocation
            log.debug("no Lambda client yet for %s: %s", target.function_name, exc)

    # ------------------------------------------------------------- invocations
    async def invoke(self, spec: FunctionSpec, args: Any, timeout_s: float) -> Outcome:
        try:
            target = spec.lambda_target()
        except NotOnLambda as exc:
            return Outcome("error", error={"type": "NotOnLambda", "message": str(exc)})
        try:
            payload = json.dumps(args, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            return Outcome("error", error={"type": "InvalidRequestContentException",
                                           "message": f"args are not JSON: {exc}"})
        out = Outcome("error")
        t0 = time.monotonic()
        for attempt in range(1, self.throttle_retries + 2):
            out.attempts = attempt
            t_call = time.monotonic()
            try:
                resp = await self._call(target, payload, timeout_s + self.timeout_grace_s)
            except (TimeoutError, ReadTimeoutError):
                out.status = "timeout"
                out.error = {"type": "Timeout",
                             "message": f"no answer within the deadline of {timeout_s:g} s"}
                out.run_s = time.monotonic() - t_call
                out.billed_ms += math.ceil(out.run_s * 1000)
                break
            except ClientError as exc:
                err, meta = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {})
                code = err.get("Code", "ClientError")
                out.error = {"type": code, "message": err.get("Message", str(exc))}
                if code in THROTTLED and attempt <= self.throttle_retries:
                    await asyncio.sleep(_backoff(attempt))
                    continue
                if meta.get("HTTPStatusCode", 0) >= 500 and attempt == 1:
                    continue
                break
            except (EndpointConnectionError, ConnectionClosedError) as exc:
                out.error = {"type": "ConnectionError", "message": str(exc)}
                if attempt == 1:
                    continue
                break
            except BotoCoreError as exc:  # no region, no credentials, a bad parameter
                out.error = {"type": type(exc).__name__, "message": str(exc)}
                break
            else:
                _read_response(resp, out, time.monotonic() - t_call)
                break
        out.queue_s = max(0.0, time.monotonic() - t0 - out.run_s - out.init_s)
        return out

    async def _call(self, target: LambdaTarget, payload: bytes, wait_s: float
                    ) -> dict[str, Any]:
        """One ``invoke`` on a worker thread; the thread outlives a wait that timed out."""
        self._busy += 1
        self._ensure_workers(self._busy)
        assert self._executor is not None
        loop = asyncio.get_running_loop()
        future: Future[dict[str, Any]] = self._executor.submit(self._invoke, target, payload)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finished))
        return await asyncio.wait_for(asyncio.wrap_future(future), wait_s)

    def _finished(self) -> None:
        self._busy -= 1

    def _invoke(self, target: LambdaTarget, payload: bytes) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"FunctionName": target.function_name,
                                  "InvocationType": "RequestResponse", "LogType": "Tail",
                                  "Payload": payload}
        if target.qualifier:
            kwargs["Qualifier"] = target.qualifier
        if self._context:
            kwargs["ClientContext"] = self._context
        resp = self._client(target).invoke(**kwargs)
        resp["Payload"] = resp["Payload"].read()
        return resp

    async def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def _backoff(attempt: int) -> float:
    """Exponential back-off with full jitter, as AWS advises for throttling."""
    return random.uniform(0, min(5.0, 0.1 * 2**attempt))


def _read_response(resp: dict[str, Any], out: Outcome, round_trip_s: float) -> None:
    """Fill the outcome from an ``invoke`` response: payload, function error, REPORT line."""
    tail = base64.b64decode(resp.get("LogResult") or "").decode(errors="replace")
    report = parse_report(tail)
    out.logs = function_output(tail)
    if "Billed Duration" in report:
        out.run_s = report.get("Duration", report["Billed Duration"]) / 1000
        out.billed_ms += int(report["Billed Duration"])
        if "Memory Size" in report:
            out.memory_mb = int(report["Memory Size"])
        if "Init Duration" in report:
            out.cold, out.init_s = True, report["Init Duration"] / 1000
    else:
        out.run_s = round_trip_s
        out.billed_ms += math.ceil(round_trip_s * 1000)
    body: bytes = resp["Payload"]
    try:
        data = json.loads(body) if body else None
    except ValueError as exc:
        out.status, out.error = "error", {"type": "ResultError",
                                          "message": f"the response is not JSON: {exc}"}
        return
    if not resp.get("FunctionError"):
        out.status, out.result, out.error = "success", data, None
        return
    err = data if isinstance(data, dict) else {}
    kind = str(err.get("errorType") or resp["FunctionError"])
    message = str(err.get("errorMessage", data if data is not None else ""))
    if kind == "Sandbox.Timedout" or "Task timed out" in message:
        out.status, out.error = "timeout", {"type": "Timeout", "message": message}
        return
    out.status, out.error = "error", {"type": kind, "message": message}
    trace = err.get("stackTrace")
    if isinstance(trace, list) and trace:
        out.error["traceback"] = "".join(str(line) for line in trace)
