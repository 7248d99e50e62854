"""Lambda's Invoke API on the gateway: ``boto3.client("lambda", endpoint_url=gateway)`` works.

``POST /2015-03-31/functions/{name}/invocations`` runs a registered function on this node's
containers (always locally, whatever its placement, so a gateway can never call itself in a
loop) and answers as Lambda does: ``RequestResponse`` with the result as the payload, ``Event``
with 202 at once, ``DryRun`` with 204; a handler's error as 200 with ``X-Amz-Function-Error:
Unhandled`` and Lambda's error payload; ``X-Amz-Executed-Version``, ``x-amzn-RequestId`` (the
invocation's record id), and with ``LogType: Tail`` the last 4 KB of its log: what the handler
wrote (as ``GET /v1/invocations/{id}/logs`` has it) between ``START`` and ``END``, then a
``REPORT`` line that carries the record's billed duration. Refusals have Lambda's shape: the code in
``x-amzn-ErrorType`` (404 ``ResourceNotFoundException``, 429 ``TooManyRequestsException``, 403
``InvalidSignatureException``, ...).

Auth: when the gateway has a bearer token or ``FAASRL_LAMBDA_API_SECRET_ACCESS_KEY``, requests
must carry a SigV4 signature by access key id ``FAASRL_LAMBDA_API_ACCESS_KEY_ID`` (default
``faasrl``) with that secret (default: the bearer token), acting as root in ``default``; or by
an API key's id with that key's derived secret (``gateway/keys.py: sigv4_secret``), acting in
the key's namespace, whose functions the names here are (bare); see ``gateway/sigv4.py``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse

from faasrl.backends.aws_lambda import CLIENT_CONTEXT_MAX
from faasrl.gateway import sigv4
from faasrl.gateway.auth import READ_METHODS
from faasrl.gateway.keys import KeyStore, sigv4_secret
from faasrl.gateway.lambda_schemas import (
    EVENT_PAYLOAD_MAX,
    EXECUTED_VERSION,
    LambdaErrorOut,
    function_arn,
    function_error,
)
from faasrl.gateway.memory import MemoryPressure
from faasrl.gateway.services import Services, ServicesDep, invocations
from faasrl.gateway.services.versions import resolve
from faasrl.invoker.errors import (
    FunctionGone,
    FunctionNotFound,
    InvokerError,
    QueueFull,
    QueueTimeout,
    QuotaExceeded,
)
from faasrl.invoker.invoker import new_invocation_id
from faasrl.invoker.records import InvocationRecord
from faasrl.namespaces import ROOT, Principal, qualify

_FUNCTION = re.compile(
    r"^(?:arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:|\d{12}:function:)?"
    r"([A-Za-z0-9_-]{1,64})(?::([A-Za-z0-9_$-]{1,128}))?$")
_LOG_TAIL_MAX = 4096  # Lambda returns the last 4 KB of the log


class LambdaApiError(Exception):
    """A refusal in Lambda's shape: ``status``, the error code, a message."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


async def _on_lambda_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LambdaApiError)
    body = LambdaErrorOut(type="User" if exc.status < 500 else "Service", message=exc.message)
    return JSONResponse(body.model_dump(by_alias=True), status_code=exc.status,
                        headers={"x-amzn-ErrorType": exc.code, **(exc.headers or {})})


def install_error_handler(app: FastAPI) -> None:
    app.add_exception_handler(LambdaApiError, _on_lambda_error)


async def require_signature(request: Request) -> Principal:
    """Who signed the request (root when the gateway has no secret to check a signature
    with): the configured access key id is root; an API key's id is that key, with its
    derived secret."""
    settings = request.app.state.settings
    secret = settings.lambda_api_secret_access_key or settings.token
    if secret is None:
        return ROOT
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    keys: KeyStore = request.app.state.services.keys
    key_id, principal = sigv4.access_key_id(headers), ROOT
    access_key_id, secret_access_key = (settings.lambda_api_access_key_id,
                                        secret.get_secret_value())
    if key_id is not None and key_id != access_key_id and keys.key(key_id) is not None:
        access_key_id, secret_access_key = key_id, sigv4_secret(secret_access_key, key_id)
    path = request.scope.get("raw_path") or request.scope["path"].encode()
    query = request.scope.get("query_string", b"").decode("latin-1")
    url = f"http://{request.headers.get('host', 'localhost')}{path.decode('latin-1')}" \
          + (f"?{query}" if query else "")
    try:
        sigv4.verify(method=request.method, url=url, headers=headers,
                     body=await request.body(),
                     access_key_id=access_key_id, secret_access_key=secret_access_key,
                     max_skew_s=settings.lambda_api_max_skew_s)
    except sigv4.SignatureError as exc:
        raise LambdaApiError(403, exc.kind, exc.message) from None
    if access_key_id != settings.lambda_api_access_key_id:
        found = keys.sigv4_principal(access_key_id)
        if found is None:  # revoked
            raise LambdaApiError(403, "UnrecognizedClientException",
                                 "The security token included in the request is invalid.")
        principal = found
    if request.method not in READ_METHODS and not principal.can_write:
        raise LambdaApiError(403, "AccessDeniedException",
                             f"key {principal.key_id} may only read (role 'read')")
    return principal


router = APIRouter(prefix="/2015-03-31/functions", tags=["lambda"],
                   dependencies=[Depends(require_signature)],
                   responses={403: {"model": LambdaErrorOut}})


@router.post(
    "/{function_name}/invocations",
    responses={200: {"description": "the result, or a FunctionErrorOut with "
                                    "X-Amz-Function-Error"},
               202: {"description": "Event: accepted"}, 204: {"description": "DryRun: valid"},
               400: {"model": LambdaErrorOut}, 404: {"model": LambdaErrorOut},
               413: {"model": LambdaErrorOut}, 429: {"model": LambdaErrorOut}})
async def invoke(function_name: str, request: Request, svc: ServicesDep,
                 principal: Annotated[Principal, Depends(require_signature)],
                 qualifier: Annotated[str | None, Query(alias="Qualifier")] = None
                 ) -> Response:
    """Lambda's Invoke: the payload is the handler's args, the response its result."""
    region = svc.settings.lambda_api_region
    match = _FUNCTION.match(function_name)
    if match is None:
        raise LambdaApiError(400, "ValidationException",
                             f"FunctionName: {function_name!r} is not a function name or ARN")
    name, qualifier = match.group(1), qualifier or match.group(2)
    arn = function_arn(region, name)
    qualified = qualify(principal.namespace, name)
    try:
        spec = svc.invoker.spec(qualified)
        version = None if qualifier is None else resolve(svc, qualified, qualifier)
    except FunctionNotFound:
        raise LambdaApiError(404, "ResourceNotFoundException", "Function not found: "
                             f"{arn}{'' if qualifier is None else ':' + qualifier}") from None
    invocation_type = request.headers.get("x-amz-invocation-type", "RequestResponse")
    if invocation_type not in ("RequestResponse", "Event", "DryRun"):
        raise LambdaApiError(400, "InvalidParameterValueException",
                             f"X-Amz-Invocation-Type: {invocation_type!r} is not one of "
                             "RequestResponse, Event, DryRun")
    log_type = request.headers.get("x-amz-log-type", "None")
    if log_type not in ("None", "Tail"):
        raise LambdaApiError(400, "InvalidParameterValueException",
                             f"X-Amz-Log-Type: {log_type!r} is not None or Tail")
    body = await request.body()
    if invocation_type == "Event" and len(body) > EVENT_PAYLOAD_MAX:
        raise LambdaApiError(413, "RequestTooLargeException",
                             f"Request must be smaller than {EVENT_PAYLOAD_MAX} bytes for the "
                             "Event invocation type")
    try:
        args = json.loads(body) if body.strip() else None
    except ValueError as exc:
        raise LambdaApiError(400, "InvalidRequestContentException",
                             f"Could not parse request body into json: {exc}") from None
    client_context = _client_context(request.headers.get("x-amz-client-context"))
    request_id = new_invocation_id()
    headers = {"x-amzn-RequestId": request_id, "X-Amz-Executed-Version":
               EXECUTED_VERSION if version is None else str(version)}

    if invocation_type == "DryRun":
        return Response(status_code=204, headers=headers)
    if invocation_type == "Event":
        try:
            await invocations.accept(svc, spec, args, invocation_id=request_id,
                                     placement="local", client_context=client_context,
                                     version=version)
        except InvokerError as exc:  # memory is short: an event can wait (a throttle)
            raise _refusal(exc, arn) from None
        return Response(status_code=202, headers=headers)

    try:
        rec = await svc.invoker.invoke(qualified, args, invocation_id=request_id,
                                       placement="local", client_context=client_context,
                                       version=version)
    except InvokerError as exc:
        raise _refusal(exc, arn) from None
    if log_type == "Tail":
        headers["X-Amz-Log-Result"] = await _tail_log(rec, svc)
    if rec.status == "success":
        return Response(json.dumps(rec.result, separators=(",", ":")),
                        media_type="application/json", headers=headers)
    headers["X-Amz-Function-Error"] = "Unhandled"
    return JSONResponse(function_error(rec, spec.timeout_s).model_dump(), headers=headers)


def _client_context(header: str | None) -> dict[str, Any] | None:
    """The ``X-Amz-Client-Context`` header: base64 of a JSON object whose ``client``,
    ``custom`` and ``env`` are objects, at most Lambda's 3,583 bytes."""
    if header is None:
        return None
    invalid = LambdaApiError(400, "InvalidRequestContentException",
                             "Client context must be a valid Base64-encoded JSON object")
    if len(header) > CLIENT_CONTEXT_MAX:
        raise LambdaApiError(400, "InvalidParameterValueException",
                             f"Client context must be at most {CLIENT_CONTEXT_MAX} bytes")
    try:
        value = json.loads(base64.b64decode(header, validate=True))
    except (ValueError, binascii.Error):
        raise invalid from None
    if not isinstance(value, dict) or any(
            not isinstance(value.get(k), dict | None) for k in ("client", "custom", "env")):
        raise invalid
    return value


def _refusal(exc: InvokerError, arn: str) -> LambdaApiError:
    if isinstance(exc, QueueFull | QueueTimeout | QuotaExceeded | MemoryPressure):
        return LambdaApiError(429, "TooManyRequestsException", f"Rate Exceeded. {exc.message}",
                              headers={"Retry-After": str(exc.retry_after_s)})
    if isinstance(exc, FunctionNotFound | FunctionGone):
        return LambdaApiError(404, "ResourceNotFoundException", f"Function not found: {arn}")
    return LambdaApiError(500, "ServiceException", f"{exc.kind}: {exc.message}")


async def _tail_log(rec: InvocationRecord, svc: Services) -> str:
    """Lambda's log of the invocation, base64 as Lambda sends it: the START, END and REPORT
    lines from the record around what the handler wrote (from the record store), whose start
    is cut to keep the whole within ``_LOG_TAIL_MAX`` bytes."""
    report = [f"REPORT RequestId: {rec.id}", f"Duration: {rec.run_s * 1000:.2f} ms",
              f"Billed Duration: {rec.billed_ms} ms", f"Memory Size: {rec.memory_mb} MB"]
    stats = svc.invoker.container_stats(rec.container) if rec.container else None
    if stats is not None:
        report.append(f"Max Memory Used: {round(stats.memory_mb)} MB")
    if rec.cold:
        report.append(f"Init Duration: {rec.init_s * 1000:.2f} ms")
    version = EXECUTED_VERSION if rec.version is None else rec.version
    start = f"START RequestId: {rec.id} Version: {version}\n".encode()
    end = (f"END RequestId: {rec.id}\n" + "\t".join(report) + "\t\n").encode()
    room = max(0, _LOG_TAIL_MAX - len(start) - len(end))
    written = ((await svc.records.logs([rec.id]))[0] or "").encode()
    return base64.b64encode(start + (written[-room:] if room else b"") + end).decode()
