"""Upload function code: a zip of the function's folder, kept in Redis by its sha256.

Whatever runs the gateway (this host, a compose container, another machine than the client's),
an uploaded archive reaches the function's containers through ``/init``; a manifest names it
with ``code_sha256``. ``faasrl functions deploy FOLDER`` uploads for you.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response, status

from faasrl import code_archive
from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import INVALID_INPUT, REDIS_ERRORS, CodeOut, ErrorOut
from faasrl.gateway.services import ServicesDep

# The body is read as bytes whatever its type: a zip's own, and the generic one that generated
# clients know how to send.
ARCHIVE_MEDIA_TYPES = ("application/zip", "application/octet-stream")

router = APIRouter(prefix="/v1/code", tags=["functions"], dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, 413: {"model": ErrorOut},
                              **INVALID_INPUT, **REDIS_ERRORS})


@router.post("", response_model=CodeOut, status_code=status.HTTP_201_CREATED,
             responses={200: {"model": CodeOut, "description": "already stored"},
                        201: {"description": "stored"}},
             openapi_extra={"requestBody": {"required": True, "content": {
                 media: {"schema": {"type": "string", "format": "binary"}}
                 for media in ARCHIVE_MEDIA_TYPES}}})
async def upload_code(request: Request, response: Response, svc: ServicesDep,
                      principal: PrincipalDep) -> CodeOut:
    """Store a zip archive of a function's folder; 200 when the namespace stored the same
    archive before. The archive is the caller's namespace's: only its manifests and jobs
    may name it."""
    data = await request.body()
    try:
        files = code_archive.check(data)
    except code_archive.ArchiveError as exc:
        raise FieldError({"body": str(exc)}) from None
    sha256 = code_archive.digest(data)
    if await svc.code.owned(principal.namespace, sha256):
        response.status_code = status.HTTP_200_OK
    elif await svc.code.exists(sha256):  # another namespace's: 201 all the same (no leak)
        await svc.code.claim(sha256, principal.namespace)
    else:
        await svc.code.put(sha256, data, principal.namespace)
    return CodeOut(sha256=sha256, bytes=len(data), files=files)
