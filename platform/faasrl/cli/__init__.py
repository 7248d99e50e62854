"""The ``faasrl`` command: start the platform, manage functions, invoke them, run jobs.

One module per command group; the top-level commands are registered here, in the order
``faasrl --help`` lists them.
"""

from __future__ import annotations

from faasrl.cli import functions, jobs, logs, up, versions
from faasrl.cli.app import app, console
from faasrl.cli.deploy import deploy_app
from faasrl.cli.namespaces import keys_app, namespaces_app
from faasrl.cli.scheduler import scheduler_app
from faasrl.client import GatewayError
from faasrl.manifest import ManifestError

for command in (up.up, up.token, up.status, functions.invoke, functions.invocations,
                functions.dead_letters, logs.logs,
                jobs.submit, jobs.run, jobs.plot):
    app.command()(command)
for command in (versions.publish, versions.versions, versions.alias):
    functions.functions_app.command()(command)
app.add_typer(functions.functions_app, name="functions")
app.add_typer(jobs.jobs_app, name="jobs")
app.add_typer(deploy_app, name="deploy")
app.add_typer(scheduler_app, name="scheduler")
app.add_typer(namespaces_app, name="namespaces")
app.add_typer(keys_app, name="keys")


def main() -> None:
    try:
        app()
    except (GatewayError, ManifestError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise SystemExit(1) from None


__all__ = ["app", "main"]
