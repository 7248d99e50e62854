"""Serving a job's policy: the built-in policy function deployed in the job's namespace.

``serve`` copies the version's weights to its served key (out of the newest-few rotation, so a
pinned version outlives training and a restart of the job), grants the job's serving user
(GET on those copies, nothing else) and registers ``functions/policy``'s manifest under the
function's name with a :class:`~faasrl.contracts.PolicyConfig` in its environment. From then on
it is a function like any other (invoke, records, cost, Lambda API). A job whose spec has a
``serve`` rule does this itself as it trains, and publishes each served version to the rule's
alias (``publish_to_alias``, the job manager's publisher).
"""

from __future__ import annotations

import time

from faasrl.contracts import POLICY_ENV, Credentials, PolicyConfig
from faasrl.data import acl
from faasrl.data.keys import params_key, served_key
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import ServeOut, ServeRequest
from faasrl.gateway.services import Services, functions, versions
from faasrl.jobs.store import JobRecord, Serving, policy_function
from faasrl.manifest import FunctionSpec, load_manifest, renamed
from faasrl.namespaces import qualify

POLICY_FUNCTION = "policy"  # the built-in function's folder under functions_dir


class NothingToServe(LookupError):
    """The job has published no weights yet."""


async def serve(svc: Services, rec: JobRecord, request: ServeRequest) -> ServeOut:
    """Deploy (or redeploy) the job's policy function; what it serves."""
    if rec.version is None:
        raise NothingToServe(f"job {rec.id} has published no weights yet")
    version = rec.version if request.version is None else request.version
    served = served_key(rec.id, version)
    await svc.redis.copy(params_key(rec.id, version), served)  # kept if already served
    if not await svc.redis.exists(served):
        raise FieldError({"version": f"version {version} is not kept (the latest is "
                                     f"{rec.version}; the newest few are kept)"})
    creds = await acl.grant_serving(svc.redis, rec.id)
    name = policy_function(rec.id, request.name)
    config = PolicyConfig(job=rec.id, version=version,
                          redis=Credentials(username=creds.username, password=creds.password))
    spec = policy_spec(svc, name, config)
    replaced = await functions.deploy(svc, renamed(spec, qualify(rec.namespace, name)))
    return ServeOut(function=name, job=rec.id, version=version, replaced=replaced)


async def publish_to_alias(svc: Services, rec: JobRecord) -> Serving:
    """The job spec's serve rule: serve the latest version, publish the policy function as a
    version and move the rule's alias to it (invocations that resolved the alias already
    finish on the version they resolved). An alias moved by hand since the rule last moved
    it (a rollback) stays where it is: the rule publishes on, and follows again once the
    alias is moved back to the rule's newest version."""
    rule = rec.spec.serve
    if rule is None:
        raise ValueError(f"job {rec.id} has no serve rule")
    out = await serve(svc, rec, ServeRequest(name=rule.name))
    function = qualify(rec.namespace, out.function)
    published = await versions.publish_version(svc, function,
                                               f"job {rec.id}, model version {out.version}")
    before = versions.aliases(svc, function).get(rule.alias)
    last = rec.serving
    if before is not None and last is not None and before.version != last.function_version:
        alias_version = before.version  # moved by hand: held there
    else:
        alias_version = published.version
        await versions.set_alias(svc, function, rule.alias, alias_version)
    await _prune(svc, rec.id, function, rule.keep)
    return Serving(function=out.function, alias=rule.alias, model_version=out.version,
                   function_version=published.version, alias_version=alias_version,
                   published_at=time.time())


async def _prune(svc: Services, job_id: str, function: str, keep: int) -> None:
    """Delete ``function``'s versions older than its newest ``keep`` that no alias routes to,
    and the served copies of the job's weights that nothing registered serves any more."""
    routed = {n for alias in versions.aliases(svc, function).values() for n in alias.versions()}
    gone = [v for v in versions.listed(svc, function)[:-keep] if v.version not in routed]
    for old in gone:
        await versions.delete_version(svc, function, old.version)
    served = {c.version for c in _configs(svc) if c.job == job_id}
    dropped = {c.version for v in gone if (c := _config(v.spec.get("env", {}))) is not None}
    if unserved := dropped - served:
        await svc.redis.delete(*(served_key(job_id, n) for n in sorted(unserved)))


def _configs(svc: Services) -> list[PolicyConfig]:
    """What every registered policy function and published version serves."""
    envs = [spec.env for spec in svc.invoker.functions()]
    envs += [v.spec.get("env", {}) for known in svc.versions.versions.values()
             for v in known.values()]
    return [c for env in envs if (c := _config(env)) is not None]


def _config(env: dict[str, str]) -> PolicyConfig | None:
    """The policy a function's environment serves (None: not a policy function's)."""
    return PolicyConfig.from_env(env) if POLICY_ENV in env else None


def policy_spec(svc: Services, name: str, config: PolicyConfig) -> FunctionSpec:
    """The built-in policy function's manifest, named ``name``, serving ``config``."""
    base = load_manifest(svc.settings.functions_dir / POLICY_FUNCTION)
    return base.model_copy(update={"name": name, "env": {**base.env, **config.to_env()}})
