"""``faasrl functions``, ``invoke`` and ``invocations``: register functions and call them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from faasrl.cli.app import connect, console, local_time
from faasrl.invoker.records import FINAL

functions_app = typer.Typer(help="Register, list and delete functions.", no_args_is_help=True)


@functions_app.command("ls")
def functions_ls() -> None:
    """List registered functions."""
    with connect() as client:
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
    with connect() as client:
        for path in paths:
            spec = client.deploy(path)
            console.print(f"deployed [bold]{spec['name']}[/bold] ({spec['handler']})")


@functions_app.command("rm")
def functions_rm(names: Annotated[list[str], typer.Argument(help="function names")]) -> None:
    """Delete functions; their containers stop once idle."""
    with connect() as client:
        for name in names:
            client.delete(name)
            console.print(f"deleted {name}")


def invoke(
    name: Annotated[str, typer.Argument(help="function name")],
    args_json: Annotated[str, typer.Option("--json", help="arguments as JSON")] = "null",
    timeout: Annotated[float | None, typer.Option(help="seconds, below the function's")] = None,
    background: Annotated[bool, typer.Option("--async", help="return the id at once")] = False,
    qualifier: Annotated[str | None, typer.Option(
        help="a published version or an alias (default $LATEST)")] = None,
) -> None:
    """Invoke a function and print its invocation record."""
    try:
        args = json.loads(args_json)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--json") from None
    with connect() as client:
        if background:
            console.print(client.invoke_async(name, args, timeout, qualifier))
            return
        rec = client.invoke(name, args, timeout, qualifier=qualifier)
    console.print_json(data=rec)
    if rec["status"] != "success":
        raise typer.Exit(2)


def invocations(
    function: Annotated[str | None, typer.Option(help="only this function's")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 20,
    status: Annotated[str | None, typer.Option(
        help=f"only those that ended so: {', '.join(FINAL)}")] = None,
) -> None:
    """Recent invocations, newest first."""
    if status is not None and status not in FINAL:
        raise typer.BadParameter(f"expected one of {', '.join(FINAL)}", param_hint="--status")
    with connect() as client:
        recs = client.invocations(function, limit, status)
    table = Table("id", "function", "status", "start", "queue ms", "init ms", "run ms",
                  "cpu ms", "billed ms")
    for r in recs:
        cpu = "-" if r.get("cpu_s") is None else f"{r['cpu_s'] * 1e3:.1f}"
        table.add_row(r["id"][:12], r["function"], r["status"], "cold" if r["cold"] else "warm",
                      f"{r['queue_s'] * 1e3:.1f}", f"{r['init_s'] * 1e3:.1f}",
                      f"{r['run_s'] * 1e3:.1f}", cpu, str(r["billed_ms"]))
    console.print(table)


def dead_letters(
    function: Annotated[str, typer.Argument(help="function name")],
    redrive: Annotated[str | None, typer.Option(help="invoke this dead letter again")] = None,
    redrive_all: Annotated[bool, typer.Option(help="invoke every dead letter again")] = False,
    delete: Annotated[str | None, typer.Option(help="delete this dead letter")] = None,
) -> None:
    """Asynchronous invocations that failed for good (after their retries), newest first;
    redrive or delete them."""
    if sum((redrive is not None, redrive_all, delete is not None)) > 1:
        raise typer.BadParameter("give one of --redrive, --redrive-all, --delete")
    with connect() as client:
        if delete is not None:
            client.delete_dead_letter(function, delete)
            console.print(f"deleted dead letter {delete}")
            return
        if redrive is not None or redrive_all:
            for out in client.redrive(function, redrive):
                console.print(f"redrove {out['dead_letter']} as invocation {out['invocation']}")
            return
        letters = client.dead_letters(function)
    table = Table("id", "failed", "condition", "attempts", "error", "args")
    for d in letters:
        error = f"{d['error'].get('type', '')}: {d['error'].get('message', '')}"
        table.add_row(d["id"], local_time(d["failed_at"]),
                      d["condition"], str(d["attempts"]), error[:60],
                      json.dumps(d["args"])[:40])
    console.print(table)
    console.print(f"{len(letters)} dead letter(s)")
