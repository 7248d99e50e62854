"""``faasrl namespaces`` and ``faasrl keys``: a team's namespaces, their quotas and API keys.

Namespaces are managed with the gateway's token; keys with it or a namespace's admin key. A
key goes where the token goes (``--token`` / ``FAASRL_TOKEN``).
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from faasrl.cli.app import connect, console
from faasrl.client import Client, GatewayError
from faasrl.namespaces import ROLES, Quota

namespaces_app = typer.Typer(help="Namespaces: create, list, show, set-quota, delete.",
                             no_args_is_help=True)
keys_app = typer.Typer(help="API keys of a namespace: create, list, revoke.",
                       no_args_is_help=True)
LIMITS = tuple(Quota.model_fields)  # the quota's fields, in order: the options' names too

CoresOpt = Annotated[float | None, typer.Option(min=0, help="cores of its busy containers")]
MemoryOpt = Annotated[int | None, typer.Option(min=1, help="MB of its containers")]
GpusOpt = Annotated[int | None, typer.Option(min=0, help="GPUs")]
ContainersOpt = Annotated[int | None, typer.Option(min=0, help="containers at once")]
JobsOpt = Annotated[int | None, typer.Option(min=0, help="jobs running at once")]
SpendOpt = Annotated[float | None, typer.Option(min=0, help="USD over the last 24 h")]


def _quota(cores: float | None, memory_mb: int | None, gpus: int | None,
           containers: int | None, jobs: int | None, spend_usd_per_day: float | None
           ) -> dict[str, Any]:
    """The limits given (in ``Quota``'s field order), as the API takes them."""
    given = (cores, memory_mb, gpus, containers, jobs, spend_usd_per_day)
    return {k: v for k, v in zip(LIMITS, given, strict=True) if v is not None}


def _limit(value: float | None, fmt: str = "g") -> str:
    return "no limit" if value is None else format(value, fmt)


def _usage_table(namespaces: list[dict[str, Any]]) -> Table:
    """Each namespace's use now against its quota (``used / limit``)."""
    table = Table("namespace", *LIMITS)
    for ns in namespaces:
        usage, quota = ns["usage"], ns["quota"]
        cells = [f"{usage[k]:.4f} / {_limit(quota[k], '.2f')}" if k == "spend_usd_per_day"
                 else f"{usage[k]:g} / {_limit(quota[k])}" for k in LIMITS]
        table.add_row(ns["name"], *cells)
    return table


@namespaces_app.command("create")
def namespaces_create(
    name: Annotated[str, typer.Argument(help="lower-case letters, digits and '-'")],
    cores: CoresOpt = None, memory_mb: MemoryOpt = None, gpus: GpusOpt = None,
    containers: ContainersOpt = None, jobs: JobsOpt = None, spend_usd_per_day: SpendOpt = None,
) -> None:
    """Create a namespace; a limit left out is no limit (the gateway's token only)."""
    with connect() as client:
        ns = client.create_namespace(name, _quota(cores, memory_mb, gpus, containers, jobs,
                                                  spend_usd_per_day))
    console.print(f"created namespace [bold]{ns['name']}[/bold]; give it a key with "
                  f"'faasrl keys create --namespace {ns['name']}'")


@namespaces_app.command("list")
def namespaces_list() -> None:
    """Namespaces with what each holds now against its quota (a key: its own)."""
    with connect() as client:
        console.print(_usage_table(client.namespaces()))


@namespaces_app.command("show")
def namespaces_show(name: Annotated[str, typer.Argument(help="namespace")]) -> None:
    """A namespace's quota, what it holds now and what it spent over the last 24 h."""
    with connect() as client:
        console.print(_usage_table([client.namespace(name)]))


@namespaces_app.command("set-quota")
def namespaces_set_quota(
    name: Annotated[str, typer.Argument(help="namespace")],
    cores: CoresOpt = None, memory_mb: MemoryOpt = None, gpus: GpusOpt = None,
    containers: ContainersOpt = None, jobs: JobsOpt = None, spend_usd_per_day: SpendOpt = None,
    no_limit: Annotated[list[str] | None, typer.Option(
        help=f"lift this limit (repeatable): {', '.join(LIMITS)}")] = None,
) -> None:
    """Change the limits given; the others stay (the gateway's token only)."""
    lifted = no_limit or []
    if unknown := [k for k in lifted if k not in LIMITS]:
        raise typer.BadParameter(f"{', '.join(unknown)}: expected {', '.join(LIMITS)}",
                                 param_hint="--no-limit")
    quota = {**_quota(cores, memory_mb, gpus, containers, jobs, spend_usd_per_day),
             **dict.fromkeys(lifted)}
    if not quota:
        raise typer.BadParameter("give a limit to change (or --no-limit)")
    with connect() as client:
        console.print(_usage_table([client.set_quota(name, quota)]))


@namespaces_app.command("delete")
def namespaces_delete(name: Annotated[str, typer.Argument(help="namespace")]) -> None:
    """Delete an empty namespace and revoke its keys (the gateway's token only)."""
    with connect() as client:
        client.delete_namespace(name)
    console.print(f"deleted namespace {name}")


@keys_app.command("create")
def keys_create(
    namespace: Annotated[str, typer.Option(help="the key's namespace")],
    role: Annotated[str, typer.Option(help=f"one of {', '.join(ROLES)}")] = "write",
    name: Annotated[str, typer.Option(help="what it is for")] = "",
) -> None:
    """Create a key; it is printed this once, with its Lambda API credentials."""
    if role not in ROLES:
        raise typer.BadParameter(f"expected one of {', '.join(ROLES)}", param_hint="--role")
    with connect() as client:
        out = client.create_key(namespace, role, name)
    console.print(f"key [bold]{out['id']}[/bold] of {out['namespace']} ({out['role']}); "
                  "it is shown this once:")
    console.print(out["key"], soft_wrap=True, highlight=False)
    if out["lambda_api"] is not None:
        console.print("Lambda API credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY):")
        console.print(out["lambda_api"]["access_key_id"], soft_wrap=True, highlight=False)
        console.print(out["lambda_api"]["secret_access_key"], soft_wrap=True, highlight=False)


def _namespaces_of(client: Client, namespace: str | None) -> list[str]:
    """``namespace``, else every namespace the caller sees."""
    return [namespace] if namespace else [ns["name"] for ns in client.namespaces()]


@keys_app.command("list")
def keys_list(namespace: Annotated[str | None, typer.Option(
        help="only this namespace's (default: every one you see)")] = None) -> None:
    """Keys with their role and last use; never the keys themselves."""
    with connect() as client:
        keys = [k for ns in _namespaces_of(client, namespace) for k in client.keys(ns)]
    table = Table("id", "namespace", "role", "name", "created", "last used", "revoked")
    for k in keys:
        table.add_row(k["id"], k["namespace"], k["role"], k["name"], _when(k["created_at"]),
                      _when(k["last_used_at"]), _when(k["revoked_at"]))
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="the key's id")],
    namespace: Annotated[str | None, typer.Option(
        help="the key's namespace (default: found among those you see)")] = None,
) -> None:
    """Revoke a key: refused from its very next request on."""
    with connect() as client:
        found = namespace or next((ns for ns in _namespaces_of(client, None)
                                   if any(k["id"] == key_id for k in client.keys(ns))), None)
        if found is None:
            raise GatewayError(404, "NotFound", f"no key {key_id!r} in the namespaces you see")
        client.revoke_key(found, key_id)
    console.print(f"revoked key {key_id} of {found}")


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
