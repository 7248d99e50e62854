"""A function's published versions and its aliases (Lambda's semantics)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response, status

from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.schemas import BODY_ERRORS, INVALID_INPUT, REDIS_ERRORS, ErrorOut, FunctionName
from faasrl.gateway.services import ServicesDep
from faasrl.gateway.services import versions as service
from faasrl.gateway.version_schemas import (
    AliasName,
    AliasOut,
    AliasRequest,
    PublishRequest,
    VersionOut,
)
from faasrl.namespaces import qualify

router = APIRouter(prefix="/v1/functions", tags=["versions"],
                   dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut},
                              **INVALID_INPUT})
VersionNumber = Annotated[str, Path(pattern=r"^[1-9][0-9]{0,8}$", description="a version number")]


@router.post("/{name}/versions", response_model=VersionOut, status_code=201,
             responses={**BODY_ERRORS, **REDIS_ERRORS})
async def publish(name: FunctionName, svc: ServicesDep, principal: PrincipalDep,
                  body: PublishRequest | None = None) -> VersionOut:
    """Publish the function as it is now as an immutable version; unchanged code, manifest
    and config since the newest version answer that version again."""
    version = await service.publish_version(
        svc, qualify(principal.namespace, name),
        body.description if body else "")
    return VersionOut.of(version)


@router.get("/{name}/versions", response_model=list[VersionOut])
async def list_versions(name: FunctionName, svc: ServicesDep, principal: PrincipalDep
                        ) -> list[VersionOut]:
    return [VersionOut.of(v)
            for v in service.listed(svc, qualify(principal.namespace, name))]


@router.delete("/{name}/versions/{version}", status_code=204,
               responses={409: {"model": ErrorOut, "description": "an alias routes to it"},
                          **REDIS_ERRORS})
async def delete_version(name: FunctionName, version: VersionNumber, svc: ServicesDep,
                         principal: PrincipalDep) -> Response:
    await service.delete_version(svc, qualify(principal.namespace, name),
                                 int(version))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{name}/aliases", response_model=list[AliasOut])
async def list_aliases(name: FunctionName, svc: ServicesDep, principal: PrincipalDep
                       ) -> list[AliasOut]:
    found = service.aliases(svc, qualify(principal.namespace, name))
    return [AliasOut.of(alias_name, alias) for alias_name, alias in found.items()]


@router.put("/{name}/aliases/{alias}", response_model=AliasOut,
            responses={201: {"model": AliasOut, "description": "created"},
                       **BODY_ERRORS, **REDIS_ERRORS})
async def put_alias(name: FunctionName, alias: AliasName, body: AliasRequest,
                    response: Response, svc: ServicesDep, principal: PrincipalDep) -> AliasOut:
    """Create (201) or move (200) an alias; invocations that already resolved it finish on
    the version they resolved."""
    found, created = await service.set_alias(
        svc, qualify(principal.namespace, name), alias, body.version,
        body.routing.additional_version_weights, body.description)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return AliasOut.of(alias, found)


@router.get("/{name}/aliases/{alias}", response_model=AliasOut)
async def get_alias(name: FunctionName, alias: AliasName, svc: ServicesDep,
                    principal: PrincipalDep) -> AliasOut:
    found = service.get_alias(svc, qualify(principal.namespace, name),
                              alias)
    return AliasOut.of(alias, found)


@router.delete("/{name}/aliases/{alias}", status_code=204, responses={**REDIS_ERRORS})
async def delete_alias(name: FunctionName, alias: AliasName, svc: ServicesDep,
                       principal: PrincipalDep) -> Response:
    await service.delete_alias(svc, qualify(principal.namespace, name),
                               alias)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
