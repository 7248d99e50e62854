"""Bodies of the namespace and key routes (``routers/namespaces.py``) and their path parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, Field

from faasrl.namespaces import NAMESPACE_NAME, Quota, Role
from faasrl.user_input import STRICT

KEY_ID = r"^[0-9a-f]{12}$"  # gateway/keys.py: a key's id, the 12 hex digits after ``frl_``
NamespaceName = Annotated[str, Path(pattern=NAMESPACE_NAME, description="a namespace's name")]
KeyId = Annotated[str, Path(pattern=KEY_ID, description="an API key's id")]


class QuotaIn(Quota):
    """A quota as a request gives it: strict numbers, as every body's (``user_input.STRICT``)."""

    model_config = STRICT

    def quota(self) -> Quota:
        """As a ``Quota`` (the limits given, so that a PATCH knows which)."""
        return Quota.model_validate(self.model_dump(exclude_unset=True))


class NamespaceCreate(BaseModel):
    model_config = STRICT

    name: str = Field(pattern=NAMESPACE_NAME, description="lower-case letters, digits and '-'")
    quota: QuotaIn = Field(default_factory=QuotaIn, description="left out: no limits")


class UsageOut(BaseModel):
    """What a namespace holds now, field by field as its ``Quota`` bounds it."""

    cores: float = Field(description="cores its functions' containers reserve")
    memory_mb: int
    gpus: float
    containers: int
    jobs: int = Field(description="its jobs pending or running")
    spend_usd_per_day: float = Field(
        description="the cost model's USD over the last 24 h: its jobs' cost_usd (jobs running "
                    "or finished within the window, whole) and its own functions' invocations "
                    "at Lambda prices")


class NamespaceOut(BaseModel):
    name: str
    quota: Quota
    created_at: float
    usage: UsageOut


class KeyCreate(BaseModel):
    model_config = STRICT

    role: Role = Field("write", description="read: GET only; write: + change; admin: + keys")
    name: str = Field("", max_length=100, description="what it is for (a label)")


class KeyOut(BaseModel):
    """A key as listed: never the key itself, nor its hash."""

    id: str
    namespace: str
    role: Role
    name: str
    created_at: float
    last_used_at: float | None = Field(description="to the minute; null: never used")
    revoked_at: float | None


class LambdaCredentials(BaseModel):
    access_key_id: str = Field(description="the key's id")
    secret_access_key: str = Field(description="derived from the gateway's secret")


class KeyCreated(KeyOut):
    key: str = Field(description="the bearer key: shown this once, never again")
    lambda_api: LambdaCredentials | None = Field(
        description="for AWS SDKs against the Lambda API; null: the gateway has no secret")


class WhoamiOut(BaseModel):
    namespace: str
    role: Role
    key_id: str | None = Field(description="null: the gateway's token (root)")
    root: bool = Field(description="the gateway's token: may create namespaces and act in any")
