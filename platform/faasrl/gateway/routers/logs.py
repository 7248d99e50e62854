"""What functions wrote (print, logging, warnings): an invocation's as text, a function's or a
job's recent invocations' as JSON, or followed as server-sent events (``follow=1``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from faasrl.data.keys import JOB_ID
from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.log_schemas import LogsOut
from faasrl.gateway.schemas import (
    INVALID_INPUT,
    REDIS_ERRORS,
    ErrorOut,
    FunctionName,
    InvocationId,
    JobId,
)
from faasrl.gateway.services import ServicesDep, invocations, logs
from faasrl.invoker.records import INDEX_LEN

router = APIRouter(tags=["logs"], dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut},
                              **INVALID_INPUT, **REDIS_ERRORS})

Follow = Annotated[bool, Query(description="stream server-sent events: the recent ones, then "
                                           "each invocation as it finishes")]
Limit = Annotated[int, Query(ge=0, le=INDEX_LEN, description="the most recent finished "
                                                             "invocations to answer (or, "
                                                             "following, to start with)")]
STREAM = {200: {"description": "JSON (LogsOut), or with follow=1 server-sent events",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/"
                                                                     "LogsOut"}},
                            "text/event-stream": {}}}}


@router.get("/v1/invocations/{invocation_id}/logs", response_class=Response,
            responses={200: {"description": "what the invocation printed, logged and warned "
                                            "(the last 64 KB)",
                             "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def invocation_logs(invocation_id: InvocationId, principal: PrincipalDep,
                          svc: ServicesDep) -> Response:
    """One invocation's output as plain text (empty when it wrote nothing); 404 when the
    invocation is unknown, or archived (its logs left Redis with its record)."""
    try:
        text = await logs.invocation(svc, principal, invocation_id)
    except logs.LogsGone as exc:
        raise HTTPException(404, str(exc)) from None
    if text is None:
        raise HTTPException(404, invocations.not_found(svc, invocation_id))
    return Response(text, media_type="text/plain; charset=utf-8")


@router.get("/v1/functions/{name}/logs", response_model=LogsOut, responses=STREAM)
async def function_logs(
        name: FunctionName, request: Request, principal: PrincipalDep, svc: ServicesDep,
        follow: Follow = False, limit: Limit = 20,
        job: Annotated[str | None, Query(pattern=JOB_ID.pattern,
                                         description="only this job's invocations")] = None
) -> Response | LogsOut:
    """The function's recent invocations' output, newest first, and its containers' own
    output; ``follow=1``: server-sent events instead (see ``GET /v1/jobs/{id}/logs``)."""
    try:
        function = logs.function_of(svc, principal, name, job)
        if follow:
            if job is not None:
                await logs.own_job(svc, principal, job)
            return _stream(logs.follow(svc, principal, [function], job, limit,
                                       closing=lambda: request.app.state.closing,
                                       disconnected=request.is_disconnected))
        return await logs.function_logs(svc, principal, function, job, limit)
    except logs.NotVisible as exc:
        raise HTTPException(404, str(exc)) from None


@router.get("/v1/jobs/{job_id}/logs", response_model=LogsOut, responses=STREAM)
async def job_logs(job_id: JobId, request: Request, principal: PrincipalDep, svc: ServicesDep,
                   follow: Follow = False, limit: Limit = 20) -> Response | LogsOut:
    """The output of the job's recent invocations of every function, newest first.
    ``follow=1``: server-sent events, ``invocation`` (one invocation's output, ``id`` its
    id) for the ``limit`` most recent, oldest first, then for each as it finishes (and, on a
    function's stream, ``container`` for its containers' own output); ``error`` and the end
    if Redis is unreachable."""
    try:
        if follow:
            await logs.own_job(svc, principal, job_id)
            functions = [spec.name for spec in svc.invoker.functions()]
            return _stream(logs.follow(svc, principal, functions, job_id, limit,
                                       closing=lambda: request.app.state.closing,
                                       disconnected=request.is_disconnected))
        return await logs.job_logs(svc, principal, job_id, limit)
    except logs.NotVisible as exc:
        raise HTTPException(404, str(exc)) from None


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
