"""The warm path's shortcut: a well-formed synchronous invoke is answered before FastAPI sees it.

FastAPI's middleware, routing, dependency solving and body handling cost about 0.3 ms of CPU per
request on our 2-core machines, as much as the rest of a warm invocation; on the one route that
runs at thousands per second that decides throughput. This wrapper sits in front of the whole
app (uvicorn serves it) and answers ``POST /v1/functions/{name}/invoke`` (no query, ``mode=sync``
or ``qualifier=``) itself when the request is plainly good: a valid name, the bearer token, a JSON
body with a declared length within the payload limit that ``InvokeRequest`` accepts. It runs
the same service function as the route (``services.invocations.run``) and answers as the route
does, errors included (through the app's own exception handlers). Anything else (a bad token,
body or name, another content type, a chunked or oversized body, ``mode=async``, any other
route) goes on to the app unchanged, so every refusal keeps the API's one error shape from
``errors.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from faasrl.gateway.auth import NAMESPACE_HEADER, identify
from faasrl.gateway.schemas import InvokeRequest
from faasrl.gateway.services import Services, invocations
from faasrl.manifest import FUNCTION_NAME
from faasrl.namespaces import qualify

_PATH = re.compile(rf"/v1/functions/({FUNCTION_NAME.strip('^$')})/invoke")
_SYNC_QUERIES = (b"", b"mode=sync")
# ``qualifier=`` alone (a version or alias; the route checks its form): a published version's
# invocation is as warm a path as $LATEST's. Unqualified requests never get this far.
_QUALIFIER = re.compile(rb"qualifier=([A-Za-z0-9_%-]{1,384})(?:&mode=sync)?")
_JSON_HEADERS = [(b"content-type", b"application/json")]
_NAMESPACE = NAMESPACE_HEADER.encode()


class FastInvoke:
    """``app`` behind the shortcut: what uvicorn serves."""

    def __init__(self, app: FastAPI):
        self.app = app
        self._max_bytes: int = app.state.settings.max_payload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        qualifier = None
        query = scope.get("query_string", b"")
        if query not in _SYNC_QUERIES and (qualified := _QUALIFIER.fullmatch(query)):
            qualifier, query = unquote(qualified[1].decode("latin-1")), b""
        match = (_PATH.fullmatch(scope["path"])
                 if scope["type"] == "http" and scope["method"] == "POST"
                 and query in _SYNC_QUERIES else None)
        if match is None:
            await self.app(scope, receive, send)
            return
        content_type, authorization, length, namespace = b"", b"", b"", b""
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"authorization":
                authorization = value
            elif name == b"content-length":
                length = value
            elif name == _NAMESPACE:
                namespace = value
        state = self.app.state
        # A namespace header goes the long way: the route checks the namespace exists.
        principal = None if namespace else identify(
            state.settings, state.services.keys, authorization.decode("latin-1"))
        if (content_type != b"application/json" or not length.isdigit()
                or int(length) > self._max_bytes
                or principal is None or not principal.can_write):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client left: the app sees it as it would have
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            request = InvokeRequest.model_validate(json.loads(body))
        except (ValueError, ValidationError):  # the route names what is wrong
            await self.app(scope, _replay(messages, receive), send)
            return
        services: Services = state.services
        try:
            payload = await invocations.run(services, qualify(principal.namespace, match[1]),
                                            request, qualifier)
        except Exception as exc:  # answered by the app's handler for it, as the route's would be
            response = await self._handler(exc)(Request(scope), exc)
            await response(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_JSON_HEADERS, (b"content-length", b"%d" % len(payload))]})
        await send({"type": "http.response.body", "body": payload})

    def _handler(self, exc: Exception) -> Any:
        """The app's exception handler for ``exc`` (its closest class that has one)."""
        handlers = self.app.exception_handlers
        return next(handlers[cls] for cls in type(exc).__mro__ if cls in handlers)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that hands out the messages already read first."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
