"""``faasrl logs``: what functions printed, logged and warned, per invocation."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from faasrl.cli.app import connect, console, local_time


def _show(event: str, data: dict[str, Any]) -> None:
    """One invocation's output (or a container's own) under a line saying whose it is."""
    if event == "invocation":
        at = local_time(data["requested_at"])
        job = f" job {data['job']}" if data.get("job") else ""
        console.print(f"[dim]{at}[/dim] [bold]{data['function']}[/bold] {data['id']} "
                      f"{data['status']}{job}", highlight=False)
    elif event == "container":
        at = local_time(data["at"])
        console.print(f"[dim]{at}[/dim] container {data['container']} (outside invocations)",
                      highlight=False)
    else:
        return
    console.out(data["logs"], end="" if data["logs"].endswith("\n") else "\n",
                highlight=False)


def logs(
    function: Annotated[str | None, typer.Argument(help="the function; leave out with --job "
                                                        "for all of a job's functions")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing invocations' "
                                                                "output as they finish")] = False,
    job: Annotated[str | None, typer.Option(help="only this job's invocations")] = None,
    limit: Annotated[int, typer.Option(help="recent invocations to show first")] = 20,
) -> None:
    """Invocations' output (print, logging, warnings), oldest first; -f follows."""
    if function is None and job is None:
        raise typer.BadParameter("name a FUNCTION, a --job, or both", param_hint="FUNCTION")
    with connect() as client:
        if follow:
            try:
                for event, data in client.follow_logs(function, job, limit):
                    _show(event, data)
            except KeyboardInterrupt:
                pass
            return
        out = (client.function_logs(function, job, limit) if function is not None
               else client.job_logs(job or "", limit))
    for container in out["containers"]:
        _show("container", container)
    for invocation in reversed(out["invocations"]):
        _show("invocation", invocation)
