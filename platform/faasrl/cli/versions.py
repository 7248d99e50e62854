"""``faasrl functions publish``, ``versions`` and ``alias``: a function's published versions
and the aliases that route to them."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from faasrl.cli.app import connect, console


def _canary(value: str | None) -> dict[int, float] | None:
    """``N:W`` (version N answers the fraction W) as the API's weights."""
    if value is None:
        return None
    version, sep, weight = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return {int(version): float(weight)}
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not VERSION:WEIGHT (e.g. 3:0.1)",
                                 param_hint="--canary") from None


def publish(name: Annotated[str, typer.Argument(help="function name")],
            description: Annotated[str, typer.Option(help="kept with the version")] = "",
            ) -> None:
    """Publish the function as it is now as an immutable version (the newest version again
    when code, manifest and config are unchanged)."""
    with connect() as client:
        version = client.publish_version(name, description)
    console.print(f"{name}: version [bold]{version['version']}[/bold] "
                  f"(code {(version['code_sha256'] or '-')[:12]})")


def versions(name: Annotated[str, typer.Argument(help="function name")]) -> None:
    """A function's published versions and its aliases."""
    with connect() as client:
        found, aliases = client.versions(name), client.aliases(name)
    table = Table("version", "published", "code", "env", "description", "aliases",
                  title=f"{name}: versions")
    for v in found:
        names = [a["name"] for a in aliases if a["version"] == v["version"]
                 or str(v["version"]) in a["routing"]["additional_version_weights"]]
        env = " ".join(f"{k}={val}" for k, val in sorted(v["manifest"].get("env", {}).items()))
        table.add_row(str(v["version"]),
                      time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v["created_at"])),
                      (v["code_sha256"] or "-")[:12], env, v["description"], ", ".join(names))
    console.print(table)
    routes = Table("alias", "version", "canary", "description", title=f"{name}: aliases")
    for a in aliases:
        canary = ", ".join(f"{k} at {w:.0%}"
                           for k, w in a["routing"]["additional_version_weights"].items())
        routes.add_row(a["name"], str(a["version"]), canary or "-", a["description"])
    console.print(routes)


def alias(
    name: Annotated[str, typer.Argument(help="function name")],
    alias_name: Annotated[str, typer.Argument(metavar="ALIAS", help="alias name")],
    version: Annotated[int | None, typer.Option(help="the version it names")] = None,
    canary: Annotated[str | None, typer.Option(
        help="VERSION:WEIGHT: one more version answers this fraction (e.g. 3:0.1)")] = None,
    delete: Annotated[bool, typer.Option("--rm", help="delete the alias")] = False,
) -> None:
    """Create or move an alias (``--version``), with a canary (``--canary``), or delete it."""
    with connect() as client:
        if delete:
            client.delete_alias(name, alias_name)
            console.print(f"deleted alias {alias_name} of {name}")
            return
        if version is None:
            raise typer.BadParameter("the version the alias names", param_hint="--version")
        out = client.set_alias(name, alias_name, version, _canary(canary))
    extra = ", ".join(f"version {k} at {w:.0%}"
                      for k, w in out["routing"]["additional_version_weights"].items())
    console.print(f"{name}:{alias_name} -> version {out['version']}"
                  + (f" (canary: {extra})" if extra else ""))
