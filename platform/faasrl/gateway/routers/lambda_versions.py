"""Lambda's version and alias API on the gateway, as boto3 calls it: PublishVersion,
ListVersionsByFunction, CreateAlias, GetAlias, UpdateAlias, DeleteAlias, ListAliases (paths
and JSON shapes from botocore's service model; signed as ``lambda_api.py``'s Invoke is)."""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from faasrl.gateway.errors import FieldError
from faasrl.gateway.lambda_schemas import EXECUTED_VERSION, LambdaErrorOut, function_arn
from faasrl.gateway.routers.lambda_api import LambdaApiError, require_signature
from faasrl.gateway.services import Services, ServicesDep
from faasrl.gateway.services import versions as service
from faasrl.invoker.errors import FunctionNotFound
from faasrl.invoker.versions import ALIAS_MAX, ALIAS_NAME, Alias, FunctionVersion
from faasrl.namespaces import Principal, qualify

router = APIRouter(prefix="/2015-03-31/functions", tags=["lambda"],
                   dependencies=[Depends(require_signature)],
                   responses={403: {"model": LambdaErrorOut}, 404: {"model": LambdaErrorOut},
                              400: {"model": LambdaErrorOut}})
Signed = Annotated[Principal, Depends(require_signature)]


def _configuration(svc: Services, name: str, spec: dict[str, Any], version: str,
                   modified: float, description: str = "") -> dict[str, Any]:
    """Lambda's FunctionConfiguration of ``name`` (bare) at ``version``."""
    arn = function_arn(svc.settings.lambda_api_region, name)
    return {"FunctionName": name, "FunctionArn": f"{arn}:{version}", "Version": version,
            "Handler": spec["handler"], "MemorySize": spec["memory_mb"],
            "Timeout": int(spec["timeout_s"]), "CodeSha256": spec.get("code_sha256") or "",
            "Description": description, "Environment": {"Variables": spec.get("env") or {}},
            "LastModified": time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime(modified)),
            "State": "Active"}


def _version(svc: Services, name: str, v: FunctionVersion) -> dict[str, Any]:
    return _configuration(svc, name, v.spec, str(v.version), v.created_at, v.description)


def _alias(svc: Services, function: str, name: str, a: Alias) -> dict[str, Any]:
    arn = function_arn(svc.settings.lambda_api_region, function)
    out: dict[str, Any] = {"AliasArn": f"{arn}:{name}", "Name": name,
                           "FunctionVersion": str(a.version), "Description": a.description,
                           "RevisionId": f"{a.version}-{a.extra}-{a.weight}"}
    if a.extra is not None:
        out["RoutingConfig"] = {"AdditionalVersionWeights": {str(a.extra): a.weight}}
    return out


def _qualified(svc: Services, principal: Principal, name: str) -> str:
    """The function's platform name; Lambda's 404 for one the caller has not."""
    qualified = qualify(principal.namespace, name)
    try:
        svc.invoker.spec(qualified)
    except FunctionNotFound:
        raise _not_found(svc, name) from None
    return qualified


def _not_found(svc: Services, name: str, qualifier: str | None = None) -> LambdaApiError:
    arn = function_arn(svc.settings.lambda_api_region, name)
    suffix = "" if qualifier is None else f":{qualifier}"
    return LambdaApiError(404, "ResourceNotFoundException", f"Function not found: {arn}{suffix}")


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise LambdaApiError(400, "InvalidRequestContentException",
                             "Could not parse request body into json") from None
    if not isinstance(body, dict):
        raise LambdaApiError(400, "InvalidRequestContentException", "the body is not an object")
    return body


def _routing(body: dict[str, Any]) -> dict[int, float]:
    """RoutingConfig.AdditionalVersionWeights with its keys as version numbers."""
    weights = (body.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {}
    if not isinstance(weights, dict) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, int | float)
            for k, v in weights.items()):
        raise LambdaApiError(400, "InvalidParameterValueException",
                             "RoutingConfig.AdditionalVersionWeights: version numbers to weights")
    return {int(k): float(v) for k, v in weights.items()}


def _number(value: Any, field: str) -> int:
    if not isinstance(value, str) or not value.isdigit():
        raise LambdaApiError(400, "InvalidParameterValueException",
                             f"{field}: {value!r} is not a published version number")
    return int(value)


async def _set_alias(svc: Services, function: str, name: str, body: dict[str, Any],
                     version: int) -> tuple[Alias, bool]:
    try:
        return await service.set_alias(svc, function, name, version,
                                       _routing(body), str(body.get("Description") or ""))
    except FieldError as exc:
        raise LambdaApiError(400, "InvalidParameterValueException", "; ".join(
            f"{k}: {v}" for k, v in exc.fields.items())) from None


@router.post("/{function_name}/versions", status_code=201)
async def publish_version(function_name: str, request: Request, svc: ServicesDep,
                          principal: Signed) -> JSONResponse:
    """PublishVersion."""
    function = _qualified(svc, principal, function_name)
    body = await _body(request) if await request.body() else {}
    version = await service.publish_version(svc, function,
                                            str(body.get("Description") or ""))
    return JSONResponse(_version(svc, function_name, version), status_code=201)


@router.get("/{function_name}/versions")
async def list_versions(function_name: str, svc: ServicesDep, principal: Signed
                        ) -> dict[str, Any]:
    """ListVersionsByFunction: $LATEST first, then the published versions."""
    function = _qualified(svc, principal, function_name)
    latest = svc.invoker.spec(function).model_dump(mode="json")
    return {"Versions": [
        _configuration(svc, function_name, latest, EXECUTED_VERSION, time.time()),
        *(_version(svc, function_name, v)
          for v in service.listed(svc, function))]}


@router.post("/{function_name}/aliases", status_code=201)
async def create_alias(function_name: str, request: Request, svc: ServicesDep,
                       principal: Signed) -> JSONResponse:
    """CreateAlias: 409 ResourceConflictException if it exists."""
    function = _qualified(svc, principal, function_name)
    body = await _body(request)
    name = body.get("Name")
    if not isinstance(name, str) or not re.fullmatch(ALIAS_NAME, name) or len(name) > ALIAS_MAX:
        raise LambdaApiError(400, "InvalidParameterValueException",
                             f"Name: {name!r} is not an alias name (letters, digits, - and _, "
                             "not all digits)")
    if name in service.aliases(svc, function):
        raise LambdaApiError(409, "ResourceConflictException", f"Alias already exists: {name}")
    alias, _ = await _set_alias(svc, function, name, body,
                                _number(body.get("FunctionVersion"), "FunctionVersion"))
    return JSONResponse(_alias(svc, function_name, name, alias), status_code=201)


@router.get("/{function_name}/aliases")
async def list_aliases(function_name: str, svc: ServicesDep, principal: Signed
                       ) -> dict[str, Any]:
    function = _qualified(svc, principal, function_name)
    found = service.aliases(svc, function)
    return {"Aliases": [_alias(svc, function_name, n, a) for n, a in found.items()]}


def _get(svc: Services, function: str, function_name: str, name: str) -> Alias:
    try:
        return service.get_alias(svc, function, name)
    except FunctionNotFound:
        raise _not_found(svc, function_name, name) from None


@router.get("/{function_name}/aliases/{alias}")
async def get_alias(function_name: str, alias: str, svc: ServicesDep, principal: Signed
                    ) -> dict[str, Any]:
    function = _qualified(svc, principal, function_name)
    return _alias(svc, function_name, alias, _get(svc, function, function_name, alias))


@router.put("/{function_name}/aliases/{alias}")
async def update_alias(function_name: str, alias: str, request: Request, svc: ServicesDep,
                       principal: Signed) -> dict[str, Any]:
    """UpdateAlias: what the body leaves out stays (a RoutingConfig given replaces the
    routing; {} ends a canary)."""
    function = _qualified(svc, principal, function_name)
    current = _get(svc, function, function_name, alias)
    body = await _body(request)
    if "RoutingConfig" not in body and current.extra is not None:
        body["RoutingConfig"] = {"AdditionalVersionWeights": {str(current.extra):
                                                              current.weight}}
    body.setdefault("Description", current.description)
    version = (current.version if body.get("FunctionVersion") is None
               else _number(body["FunctionVersion"], "FunctionVersion"))
    found, _ = await _set_alias(svc, function, alias, body, version)
    return _alias(svc, function_name, alias, found)


@router.delete("/{function_name}/aliases/{alias}", status_code=204)
async def delete_alias(function_name: str, alias: str, svc: ServicesDep, principal: Signed
                       ) -> Response:
    function = _qualified(svc, principal, function_name)
    _get(svc, function, function_name, alias)
    await service.delete_alias(svc, function, alias)
    return Response(status_code=204)


