"""The ``faasrl`` command: start the platform, manage functions, invoke them, look at the node."""

from __future__ import annotations

import json
import logging
import secrets
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.logging import RichHandler
from rich.panel import Panel
from rich.table import Table

from faasrl.client import Client, GatewayError
from faasrl.config import Settings
from faasrl.manifest import ManifestError

app = typer.Typer(help="faasrl: a serverless-style FaaS platform for distributed deep RL.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
functions_app = typer.Typer(help="Register, list and delete functions.", no_args_is_help=True)
app.add_typer(functions_app, name="functions")
console = Console()
_target: dict[str, str | None] = {"url": None, "token": None}


@app.callback()
def _options(
    url: Annotated[str | None, typer.Option(envvar="FAASRL_URL", help="gateway URL")] = None,
    token: Annotated[str | None, typer.Option(envvar="FAASRL_TOKEN", help="bearer token")] = None,
) -> None:
    _target.update(url=url, token=token)


def _client() -> Client:
    return Client.discover(_target["url"], _target["token"])


def main() -> None:
    try:
        app()
    except (GatewayError, ManifestError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise SystemExit(1) from None


# ----------------------------------------------------------------------------- up
@app.command()
def up(
    host: Annotated[str | None, typer.Option(help="bind address [127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="gateway port [8080]")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="pids, logs, Redis data")] = None,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="serve /v1 without a token")] = False,
    access_log: Annotated[bool, typer.Option(help="log every request")] = False,
) -> None:
    """Start the platform: embedded Redis (unless FAASRL_REDIS_URL), gateway and invoker.

    Binds 127.0.0.1 and requires a bearer token (generated unless FAASRL_TOKEN is set).
    Ctrl-C stops every container and Redis.
    """
    from faasrl.embedded import EmbeddedPlatform

    overrides: dict[str, Any] = {k: v for k, v in
                                 {"host": host, "port": port, "state_dir": state_dir}.items()
                                 if v is not None}
    settings = Settings(**overrides)
    if no_auth:
        settings = settings.model_copy(update={"token": None})
    elif settings.token is None:
        settings = settings.model_copy(update={"token": SecretStr(secrets.token_urlsafe(24))})
    logging.basicConfig(level=logging.INFO, format="%(message)s",
                        handlers=[RichHandler(console=console, show_path=False)])
    platform = EmbeddedPlatform(settings, access_log=access_log)
    with console.status("starting the platform"):
        platform.start()
    lines = [f"gateway  {platform.url}   (API docs at {platform.url}/docs)",
             f"redis    {platform.redis_url}" + ("  (embedded)" if platform.redis else ""),
             f"state    {settings.state_dir}",
             f"token    {platform.token}" if platform.token else "auth     off (--no-auth)",
             "", "Ctrl-C stops every container and Redis."]
    console.print(Panel("\n".join(lines), title="faasrl is up", expand=False))
    # Stop cleanly on SIGTERM too, and on SIGINT even when started in the background (where
    # the shell leaves SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        platform.wait()
    except KeyboardInterrupt:
        console.print("stopping: containers, gateway, Redis")
    finally:
        platform.stop()


# ------------------------------------------------------------------------- status
@app.command()
def status() -> None:
    """Capacity of the node, and containers per function by state."""
    with _client() as client:
        health, cluster = client.health(), client.cluster()
    cap, res = cluster["capacity"], cluster["reserved"]
    console.print(f"[bold]{client.url}[/bold]  redis {health['redis']}  "
                  f"backend {cluster['backend']}  "
                  f"cpu {res['cpu']:g}/{cap['cpu']:g}  memory {res['memory_mb']}/"
                  f"{cap['memory_mb']} MB  gpus {res['gpus']}/{cap['gpus']}")
    table = Table("function", "starting", "idle", "busy", "stopping", "queued")
    for name, pool in sorted(cluster["functions"].items()):
        states = [c["state"] for c in pool["containers"]]
        table.add_row(name, *(str(states.count(s)) for s in
                              ("starting", "idle", "busy", "stopping")), str(pool["queued"]))
    console.print(table)


# ---------------------------------------------------------------------- functions
@functions_app.command("ls")
def functions_ls() -> None:
    """List registered functions."""
    with _client() as client:
        specs = client.functions()
    table = Table("name", "handler", "cpu", "memory_mb", "gpu", "timeout_s", "min_warm",
                  "keep_alive_s", "concurrency")
    for s in specs:
        table.add_row(s["name"], s["handler"], f"{s['cpu']:g}", str(s["memory_mb"]),
                      str(s["gpu"]), f"{s['timeout_s']:g}", str(s["min_warm"]),
                      f"{s['keep_alive_s']:g}", str(s["max_concurrency"]))
    console.print(table)


@functions_app.command("deploy")
def functions_deploy(
    paths: Annotated[list[Path], typer.Argument(help="function folders (or manifest files)")],
) -> None:
    """Register or replace functions from their manifests."""
    with _client() as client:
        for path in paths:
            spec = client.deploy(path)
            console.print(f"deployed [bold]{spec['name']}[/bold] ({spec['handler']})")


@functions_app.command("rm")
def functions_rm(names: Annotated[list[str], typer.Argument(help="function names")]) -> None:
    """Delete functions; their containers stop once idle."""
    with _client() as client:
        for name in names:
            client.delete(name)
            console.print(f"deleted {name}")


# ------------------------------------------------------------------------- invoke
@app.command()
def invoke(
    name: Annotated[str, typer.Argument(help="function name")],
    args_json: Annotated[str, typer.Option("--json", help="arguments as JSON")] = "null",
    timeout: Annotated[float | None, typer.Option(help="seconds, below the function's")] = None,
    background: Annotated[bool, typer.Option("--async", help="return the id at once")] = False,
) -> None:
    """Invoke a function and print its invocation record."""
    try:
        args = json.loads(args_json)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--json") from None
    with _client() as client:
        if background:
            console.print(client.invoke_async(name, args, timeout))
            return
        rec = client.invoke(name, args, timeout)
    console.print_json(data=rec)
    if rec["status"] != "success":
        raise typer.Exit(2)


@app.command()
def invocations(
    function: Annotated[str | None, typer.Option(help="only this function's")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 20,
) -> None:
    """Recent invocations, newest first."""
    with _client() as client:
        recs = client.invocations(function, limit)
    table = Table("id", "function", "status", "start", "queue ms", "init ms", "run ms",
                  "billed ms")
    for r in recs:
        table.add_row(r["id"][:12], r["function"], r["status"], "cold" if r["cold"] else "warm",
                      f"{r['queue_s'] * 1e3:.1f}", f"{r['init_s'] * 1e3:.1f}",
                      f"{r['run_s'] * 1e3:.1f}", str(r["billed_ms"]))
    console.print(table)
