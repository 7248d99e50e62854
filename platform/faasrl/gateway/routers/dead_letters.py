"""A function's dead letters: asynchronous invocations that failed for good."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Response, status
from starlette.convertors import Convertor, register_url_convertor

from faasrl.gateway.async_events import DeadLetter
from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import (
    BODY_ERRORS,
    INVALID_INPUT,
    REDIS_ERRORS,
    ErrorOut,
    FunctionName,
    InvocationId,
    RedriveOut,
    RedriveRequest,
)
from faasrl.gateway.services import ServicesDep, dead_letters
from faasrl.namespaces import qualify


class _LetterPath(Convertor[str]):
    """A dead letter's id in a path: anything but ``redrive`` (its sibling route), so a
    malformed id still reaches the route (a 422 naming it) and ``DELETE .../redrive`` is a
    405, not a letter named "redrive"."""

    regex = "(?!redrive$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("dead_letter", _LetterPath())

router = APIRouter(prefix="/v1/functions", tags=["functions"],
                   dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut},
                              **INVALID_INPUT, **REDIS_ERRORS})


@router.get("/{name}/dead-letters", response_model=list[DeadLetter])
async def list_dead_letters(name: FunctionName, principal: PrincipalDep, svc: ServicesDep
                            ) -> list[DeadLetter]:
    """The function's dead letters, newest first (at most ``DEAD_LETTERS_MAX``)."""
    return await dead_letters.listed(svc, qualify(principal.namespace, name))


@router.post("/{name}/dead-letters/redrive", response_model=RedriveOut,
             responses={429: {"model": ErrorOut}, **BODY_ERRORS})
async def redrive(name: FunctionName, body: RedriveRequest, principal: PrincipalDep,
                  svc: ServicesDep) -> RedriveOut:
    """Invoke dead letters again, asynchronously: one (``id``) or ``all``. Each becomes a new
    invocation with a full retry budget and leaves the list."""
    if (body.id is None) != body.all:
        raise FieldError({"id": "give a dead letter's id, or all: true (one of the two)"})
    out = await dead_letters.redrive(svc, qualify(principal.namespace, name), body.id)
    if body.id is not None and not out:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"{name!r} has no dead letter {body.id!r}")
    return RedriveOut(redriven=out)


@router.delete("/{name}/dead-letters/{letter_id:dead_letter}",
                status_code=status.HTTP_204_NO_CONTENT)
async def delete_dead_letter(name: FunctionName, letter_id: InvocationId,
                             principal: PrincipalDep, svc: ServicesDep) -> Response:
    if not await dead_letters.delete(svc, qualify(principal.namespace, name), letter_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"{name!r} has no dead letter {letter_id!r}")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
