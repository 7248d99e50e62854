"""Namespaces and API keys in Redis, held in memory so that a request's key check costs a dict
lookup and a hash, never a round trip.

A key reads ``frl_<id>_<secret>``; Redis keeps its id, namespace, role and the sha256 of the whole
key (never the key), so a key is shown once, at creation. Its Lambda API secret (SigV4 needs one
the gateway can recompute, not a hash) is derived from the gateway's own secret and the key's
id: ``sigv4_secret``. One gateway serves a Redis, so what it holds in memory is the truth; it
loads everything at start and writes through on every change. Last use is kept to the minute,
written behind the request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import asdict, dataclass

from redis.asyncio import Redis

from faasrl.data.keys import API_KEYS, NAMESPACES
from faasrl.namespaces import DEFAULT, Namespace, Principal, Quota, Role

KEY_PREFIX = "frl_"
LAST_USED_EVERY_S = 60.0  # how stale a key's last use may be in Redis


@dataclass
class ApiKey:
    id: str
    namespace: str
    role: Role
    sha256: str
    name: str = ""
    created_at: float = 0.0
    last_used_at: float | None = None
    revoked_at: float | None = None

    def principal(self) -> Principal:
        return Principal(self.namespace, self.role, key_id=self.id)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str | None:
    """The id inside a well-formed key, else None."""
    if not key.startswith(KEY_PREFIX):
        return None
    key_id, sep, secret = key[len(KEY_PREFIX):].partition("_")
    return key_id if sep and secret and len(key_id) == 12 else None


def sigv4_secret(gateway_secret: str, key_id: str) -> str:
    """The Lambda API secret access key of key ``key_id`` (its access key id is the key's id)."""
    return hmac.new(gateway_secret.encode(), f"sigv4:{key_id}".encode(),
                    hashlib.sha256).hexdigest()


class KeyStore:
    """Namespaces and keys: create, list, revoke, and the principal a presented key is."""

    def __init__(self, redis: Redis):
        self._redis = redis
        self._namespaces: dict[str, Namespace] = {}
        self._keys: dict[str, ApiKey] = {}
        self._written_use: dict[str, float] = {}

    async def load(self) -> None:
        stored = await self._redis.hgetall(NAMESPACES)
        self._namespaces = {k.decode(): Namespace.model_validate_json(v)
                            for k, v in stored.items()}
        self._namespaces.setdefault(DEFAULT, Namespace(name=DEFAULT))
        keys = await self._redis.hgetall(API_KEYS)
        self._keys = {k.decode(): ApiKey(**json.loads(v)) for k, v in keys.items()}

    # ---------------------------------------------------------------- namespaces
    def namespaces(self) -> list[Namespace]:
        return sorted(self._namespaces.values(), key=lambda n: n.name)

    def namespace(self, name: str) -> Namespace | None:
        return self._namespaces.get(name)

    async def save_namespace(self, namespace: Namespace) -> None:
        if not namespace.created_at:
            namespace = namespace.model_copy(update={"created_at": time.time()})
        await self._redis.hset(NAMESPACES, namespace.name, namespace.model_dump_json())
        self._namespaces[namespace.name] = namespace

    async def delete_namespace(self, name: str) -> None:
        """Forget a namespace and revoke its keys (its resources are the caller's to delete)."""
        for key in self.keys(name):
            await self.revoke(key.id)
        await self._redis.hdel(NAMESPACES, name)
        self._namespaces.pop(name, None)

    def quota(self, name: str) -> Quota:
        ns = self._namespaces.get(name)
        return ns.quota if ns is not None else Quota()

    # ---------------------------------------------------------------- keys
    def keys(self, namespace: str | None = None) -> list[ApiKey]:
        return sorted((k for k in self._keys.values()
                       if namespace is None or k.namespace == namespace),
                      key=lambda k: k.created_at)

    def key(self, key_id: str) -> ApiKey | None:
        return self._keys.get(key_id)

    async def create_key(self, namespace: str, role: Role, name: str = "") -> tuple[ApiKey, str]:
        """A new key of ``namespace``: its record and the key itself (shown once)."""
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
        record = ApiKey(key_id, namespace, role, digest(key), name, created_at=time.time())
        await self._write(record)
        return record, key

    async def revoke(self, key_id: str) -> ApiKey | None:
        record = self._keys.get(key_id)
        if record is None:
            return None
        if record.revoked_at is None:
            record.revoked_at = time.time()
            await self._write(record)
        return record

    def principal(self, key: str) -> Principal | None:
        """Who a presented key is, or None (unknown, malformed or revoked). Notes its use."""
        key_id = key_id_of(key)
        record = self._keys.get(key_id) if key_id is not None else None
        if (record is None or record.revoked_at is not None
                or not hmac.compare_digest(record.sha256, digest(key))):
            return None
        record.last_used_at = time.time()
        return record.principal()

    def sigv4_principal(self, key_id: str) -> Principal | None:
        """The principal of a live key by its id (SigV4 proves the secret separately)."""
        record = self._keys.get(key_id)
        if record is None or record.revoked_at is not None:
            return None
        record.last_used_at = time.time()
        return record.principal()

    async def flush_use(self) -> None:
        """Write last-use times that moved by more than ``LAST_USED_EVERY_S``."""
        for record in list(self._keys.values()):
            used = record.last_used_at
            if used is not None and used - self._written_use.get(record.id, 0.0) \
                    >= LAST_USED_EVERY_S:
                await self._write(record)

    async def _write(self, record: ApiKey) -> None:
        await self._redis.hset(API_KEYS, record.id, json.dumps(asdict(record)))
        self._keys[record.id] = record
        if record.last_used_at is not None:
            self._written_use[record.id] = record.last_used_at
