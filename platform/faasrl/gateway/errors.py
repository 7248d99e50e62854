"""One error shape for every 4xx/5xx: ``{"error": {"type", "message", "fields"?}}``.

Validation errors name the offending field (``fields`` maps each to its problem), so bad input is
always a clear 4xx, never a 500: a body that is not JSON is a 400 ``InvalidJSON``, a Redis that
cannot be reached a 503 ``RedisUnavailable`` with ``Retry-After``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from faasrl.data.connection import UNREACHABLE
from faasrl.invoker.errors import InvokerError
from faasrl.runtime.invalid import INVALID_ARGS

log = logging.getLogger(__name__)
_LOCATIONS = ("body", "query", "path", "header")
_KINDS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
          405: "MethodNotAllowed", 409: "Conflict", 413: "PayloadTooLarge", 422: "ValidationError"}
_HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
REDIS_RETRY_AFTER_S = 5  # a restarted Redis replays its append-only file within seconds


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, **extra}}


def redis_unavailable_body(exc: Exception) -> dict[str, Any]:
    return error_body("RedisUnavailable", f"Redis is unreachable ({type(exc).__name__}: "
                                          f"{exc}); retry in {REDIS_RETRY_AFTER_S} s")


class FieldError(Exception):
    """Input that parsed but cannot be accepted; answered with 422 naming the fields."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


class HandlerRefusedArgs(Exception):
    """A synchronous invocation whose handler refused an argument (``InvalidArgs``): answered
    400 naming the field, with the invocation's id (its record is kept and billed)."""

    def __init__(self, invocation_id: str, error: dict[str, Any]):
        super().__init__(error.get("message", ""))
        self.invocation_id = invocation_id
        self.field = str(error["field"])


async def _on_refused_args(_: Request, exc: HandlerRefusedArgs) -> JSONResponse:
    detail = str(exc).removeprefix(f"{exc.field}: ")
    return JSONResponse(error_body(INVALID_ARGS, str(exc), fields={exc.field: detail},
                                   invocation=exc.invocation_id), status_code=400)


def _field_response(fields: dict[str, str]) -> JSONResponse:
    message = "; ".join(f"{k}: {v}" for k, v in fields.items())
    return JSONResponse(error_body("ValidationError", message, fields=fields), status_code=422)


def _invalid_json(message: str) -> JSONResponse:
    return JSONResponse(error_body("InvalidJSON", f"the body is not valid JSON: {message}"),
                        status_code=400)


async def _on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    for err in errors:  # FastAPI reports a JSON syntax error as a field at a character offset
        if err.get("type") == "json_invalid":
            loc = err.get("loc", ())
            at = f" at character {loc[-1]}" if len(loc) > 1 else ""
            return _invalid_json(f"{err.get('ctx', {}).get('error', 'unparsable')}{at}")
    fields: dict[str, str] = {}
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in _LOCATIONS:
            loc = loc[1:]
        fields[".".join(loc) or "body"] = err.get("msg", "invalid")
    return _field_response(fields)


async def _on_field_error(_: Request, exc: FieldError) -> JSONResponse:
    return _field_response(exc.fields)


def invoker_error_response(exc: InvokerError) -> JSONResponse:
    """A refused invocation (unknown function, queue full, no container in time)."""
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.status in (429, 503) else None
    return JSONResponse(error_body(exc.kind, exc.message), status_code=exc.status,
                        headers=headers)


async def _on_invoker_error(_: Request, exc: InvokerError) -> JSONResponse:
    return invoker_error_response(exc)


async def _on_redis_unavailable(_: Request, exc: Exception) -> JSONResponse:
    log.warning("answering 503: %s: %s", type(exc).__name__, exc)
    return JSONResponse(redis_unavailable_body(exc), status_code=503,
                        headers={"Retry-After": str(REDIS_RETRY_AFTER_S)})


async def _on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
        return _invalid_json(str(exc.__cause__))  # FastAPI's "error parsing the body"
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed_methods(request, headers)}
    kind = _KINDS.get(exc.status_code, "Error")
    return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code,
                        headers=headers)


def _allowed_methods(request: Request, headers: dict[str, str] | None) -> str:
    """Every method the request's path allows. Starlette's 405 names only the methods of the
    first route whose path matched, though routes for other methods share that path."""
    methods = {m.strip() for m in (headers or {}).get("Allow", "").split(",") if m.strip()}
    path = request.scope.get("path", "")
    matched = [(params, methods_of) for template, params, methods_of in _path_table(request.app)
               if template.match(path)]
    # A literal segment wins over a parameter (``.../dead-letters/redrive`` over
    # ``.../dead-letters/{letter_id}``, whose route refuses that value), as routing does.
    fewest = min((params for params, _ in matched), default=0)
    for params, methods_of in matched:
        if params == fewest:
            methods |= methods_of
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD wherever it answers GET
    return ", ".join(sorted(methods))


def _path_table(app: FastAPI) -> list[tuple[re.Pattern[str], int, set[str]]]:
    """(path regex, its parameters, methods) per path of the OpenAPI document, built once
    per app."""
    table = getattr(app.state, "path_methods", None)
    if table is None:
        table = [(compile_path(path)[0], path.count("{"),
                  {m.upper() for m in ops if m in _HTTP_METHODS})
                 for path, ops in app.openapi().get("paths", {}).items()]
        app.state.path_methods = table
    return table


async def _on_unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return JSONResponse(error_body("InternalError", f"{type(exc).__name__}: {exc}"),
                        status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(FieldError, _on_field_error)
    app.add_exception_handler(HandlerRefusedArgs, _on_refused_args)
    app.add_exception_handler(InvokerError, _on_invoker_error)
    for cls in UNREACHABLE:
        app.add_exception_handler(cls, _on_redis_unavailable)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, whether declared or chunked."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > self.max_bytes:
                await self._refuse(send)
                return
            await self.app(scope, receive, send)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b""):
            await self.app(scope, receive, send)
            return
        # A chunked body: read it here, up to the limit, and hand it on whole.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await JSONResponse(
            error_body("PayloadTooLarge", f"request body over {self.max_bytes} bytes"),
            status_code=413)({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
