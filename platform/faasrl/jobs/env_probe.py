"""What a job's environment is, learnt without importing it in the gateway.

A submit asks the job's actor function, through the invoker like any invocation, to
``describe`` the env: the function imports the env's code, builds the env as training will,
runs gymnasium's env checker and answers an :class:`~faasrl.env_code.EnvDescription` (spaces,
dtypes, episode limit), or the stage that failed and the exception's last lines. A user's
module that raises, loops forever or eats memory does so in a function container, bounded by
the probe's deadline; the gateway only reads JSON.

Descriptions are cached per (archive, entry point, imports, kwargs, episode limit, env id):
in this process, and in a Redis hash next to the job records, so a restarted gateway or a
second one sharing the Redis does not probe again. Failures are not cached: a fixed archive
has another digest, and a timed-out probe may pass on a less busy node.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from faasrl.code_archive import NO_ARCHIVE
from faasrl.contracts import ContractError, DescribeArgs, DescribeResult, parse
from faasrl.data.keys import ENV_DESCRIPTIONS
from faasrl.env_code import EnvDescription
from faasrl.env_layers import NO_LAYERS_ON_LAMBDA
from faasrl.env_layers.install import LayerError, LayerStore, requirements_of
from faasrl.invoker import Invoker
from faasrl.invoker.registry import CodeStore
from faasrl.jobs.errors import InvalidJobField
from faasrl.jobs.spec import JobSpec
from faasrl.namespaces import DEFAULT
from faasrl.rl.env_probe import TIMED_OUT

TIMEOUT_GRACE_S = 5.0  # the invocation's deadline beyond the probe's own: its answer first
log = logging.getLogger(__name__)


def probe_key(spec: JobSpec) -> str:
    """What a description depends on, as one digest."""
    env = spec.env
    parts = [spec.env_id] if env is None else [
        spec.env_id, env.code_sha256, env.entry_point, env.imports, env.kwargs,
        env.max_episode_steps]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def env_field(spec: JobSpec) -> str:
    """The spec's field a failed probe is answered against."""
    return "env_id" if spec.env is None else "env"


class EnvProbe:
    def __init__(self, invoker: Invoker, redis: Redis, code: CodeStore, timeout_s: float,
                 layers: Callable[[], Awaitable[LayerStore]]):
        self._invoker = invoker
        self._redis = redis
        self._code = code
        self.timeout_s = timeout_s
        self._layers = layers  # the backend's layer store (faasrl.env_layers)
        self._layered: set[str] = set()  # archives whose layer this process made sure of
        self._cache: dict[str, EnvDescription] = {}
        self._probing: dict[str, asyncio.Future[EnvDescription]] = {}

    async def describe(self, spec: JobSpec, on_lambda: bool = False,
                       namespace: str = DEFAULT) -> EnvDescription:
        """The env of ``spec``, described (from the cache when it was before); an env that
        cannot be described is an :class:`InvalidJobField` naming ``env`` (``env_id`` for a
        gymnasium id) with the stage that failed and why. An archive's ``requirements.txt`` is
        installed first (``install_requirements``): the probe imports the env with it. The
        archive must be ``namespace``'s (one of another namespace is answered as unknown)."""
        env = spec.env
        if env is not None and env.code_dir is not None:
            raise InvalidJobField("env.code_dir", "a folder on the client: `faasrl submit`, "
                                  "`faasrl run` and faasrl.client upload it and send its "
                                  "code_sha256; the gateway takes only code_sha256")
        if env is not None and env.code_sha256 is not None \
                and not await self._code.owned(namespace, env.code_sha256):
            raise InvalidJobField("env.code_sha256", NO_ARCHIVE)
        await self.install_requirements(spec, on_lambda)
        key = probe_key(spec)
        if (known := self._cache.get(key)) is not None:
            return known
        if (raw := await self._redis.hget(ENV_DESCRIPTIONS, key)) is not None:
            self._cache[key] = EnvDescription.model_validate_json(raw)
            return self._cache[key]
        probing = self._probing.get(key)
        if probing is None:  # one probe for submits of the same env at once
            probing = self._probing[key] = asyncio.ensure_future(self._probe(spec, key))
            probing.add_done_callback(lambda task: self._probed(key, task))
        return await asyncio.shield(probing)  # a submit that goes away leaves it running

    async def install_requirements(self, spec: JobSpec, on_lambda: bool) -> None:
        """The env layer of the spec's archive, installed where the backend's functions read
        it (once per archive: later calls only check it is there), when the archive has a
        ``requirements.txt``; a refused or failed install is an :class:`InvalidJobField`
        naming ``env`` with pip's last lines. ``on_lambda``: the job's actors run on AWS
        Lambda, which gets no layers."""
        sha = spec.env.code_sha256 if spec.env is not None else None
        if sha is None or sha in self._layered:
            return
        data = await self._code.get(sha)
        if data is None:
            raise InvalidJobField("env.code_sha256", NO_ARCHIVE)
        try:
            if requirements_of(data):
                if on_lambda:
                    raise InvalidJobField("env", NO_LAYERS_ON_LAMBDA)
                store = await self._layers()
                await store.ensure(data, sha, progress=lambda line: log.info(
                    "env layer %s: %s", sha[:12], line))
        except LayerError as exc:
            raise InvalidJobField("env", str(exc)) from None
        self._layered.add(sha)

    def _probed(self, key: str, task: asyncio.Future[EnvDescription]) -> None:
        self._probing.pop(key, None)
        if not task.cancelled():
            task.exception()  # read here: every submit that waited for it may have gone

    async def _probe(self, spec: JobSpec, key: str) -> EnvDescription:
        env, field = spec.env, env_field(spec)
        code = None
        if env is not None and env.code_sha256 is not None:
            data = await self._code.get(env.code_sha256)
            if data is None:
                raise InvalidJobField("env.code_sha256", NO_ARCHIVE)
            code = base64.b64encode(data).decode()
        args = DescribeArgs(env_id=spec.env_id, env=env, code=code, timeout_s=self.timeout_s)
        rec = await self._invoker.invoke(spec.actor_function, args.model_dump(mode="json"),
                                         timeout_s=self.timeout_s + TIMEOUT_GRACE_S,
                                         placement=spec.placement.actors)
        if rec.status == "timeout":
            raise InvalidJobField(field, f"timed out: describing the env took longer than "
                                  f"{self.timeout_s:g} s (import, build, reset, env checker)")
        if rec.status != "success":  # an env that fails is an answer: this is the function
            err = rec.error or {}
            raise InvalidJobField("actor_function", f"{spec.actor_function!r} cannot describe "
                                  f"envs: {err.get('type', '?')}: {err.get('message', '')}")
        try:
            out = parse(DescribeResult, rec.result, f"{spec.actor_function} describe result")
        except ContractError as exc:
            raise InvalidJobField("actor_function", f"{spec.actor_function!r} cannot describe "
                                  f"envs: {exc}") from None
        if out.description is None:
            stage, error = out.stage or "describe", out.error or ""
            if error.startswith(TIMED_OUT):  # the probe's own limit: "timed out after N s"
                raise InvalidJobField(field, f"{error} at {stage}: an import, reset or step "
                                      "that does not return")
            raise InvalidJobField(field, f"failed at {stage}: {error}")
        self._cache[key] = out.description
        await self._redis.hset(ENV_DESCRIPTIONS, key, out.description.model_dump_json())
        return out.description
