"""The API's shapes for a function's published versions and aliases."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from faasrl.invoker.versions import ALIAS_MAX, ALIAS_NAME, Alias, FunctionVersion

AliasName = Annotated[str, StringConstraints(pattern=ALIAS_NAME, max_length=ALIAS_MAX)]


class PublishRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field("", max_length=256)


class VersionOut(BaseModel):
    version: int
    code_sha256: str | None = Field(description="the code it runs (its folder packed, for a "
                                                "function deployed from one)")
    digest: str = Field(description="of code, manifest and config: a publish that would "
                                    "change none of them returns this version again")
    created_at: float
    description: str
    manifest: dict[str, Any] = Field(description="the manifest it runs (env: its config)")

    @classmethod
    def of(cls, v: FunctionVersion) -> VersionOut:
        return cls(version=v.version, code_sha256=v.spec.get("code_sha256"), digest=v.digest,
                   created_at=v.created_at, description=v.description, manifest=v.spec)


class Routing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    additional_version_weights: dict[int, float] = Field(
        default_factory=dict, description="at most one more version and the fraction of the "
        "alias's invocations it answers, in [0, 1) (Lambda's AdditionalVersionWeights)")


class AliasRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    routing: Routing = Field(default_factory=Routing)
    description: str = Field("", max_length=256)


class AliasOut(BaseModel):
    name: str
    version: int
    routing: Routing
    description: str

    @classmethod
    def of(cls, name: str, a: Alias) -> AliasOut:
        weights = {} if a.extra is None else {a.extra: a.weight}
        return cls(name=name, version=a.version, description=a.description,
                   routing=Routing(additional_version_weights=weights))
