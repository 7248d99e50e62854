"""``faasrl deploy lambda``: a function's image onto AWS Lambda, step by step."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from faasrl.cli.app import console

deploy_app = typer.Typer(help="Deploy functions elsewhere: lambda (AWS Lambda).",
                         no_args_is_help=True)


@deploy_app.command("lambda")
def deploy_lambda(
    function: Annotated[str, typer.Option(help="the faasrl function")] = "actor",
    memory: Annotated[int, typer.Option(min=128, max=10240, help="MB")] = 1024,
    timeout: Annotated[int, typer.Option(min=1, max=900, help="seconds")] = 60,
    provisioned: Annotated[int, typer.Option(min=0, help="provisioned concurrency (0 removes)")
                           ] = 0,
    name: Annotated[str | None, typer.Option(help="Lambda function (default faasrl-FUNCTION)")
                    ] = None,
    image: Annotated[str | None, typer.Option(help="local image (default faasrl/lambda-FUNCTION)")
                     ] = None,
    repository: Annotated[str | None, typer.Option(help="ECR repository (default faasrl-FUNCTION)")
                          ] = None,
    role: Annotated[str | None, typer.Option(help="execution role ARN (default: faasrl-lambda)")
                    ] = None,
    alias: Annotated[str, typer.Option(help="alias that gets the new version")] = "live",
    region: Annotated[str | None, typer.Option(help="AWS region (default: boto3's)")] = None,
    push_registry: Annotated[str | None, typer.Option(
        help="push to this registry (host:port) instead of ECR's")] = None,
) -> None:
    """Deploy a function's Lambda image (deploy/aws-lambda/) to AWS Lambda; print its ARN.

    Credentials and region come from boto3's standard chain (environment, profile, role).
    """
    import boto3

    from faasrl.lambda_deploy import (
        DeployError,
        LambdaDeployer,
        LambdaDeployment,
        manifest_section,
    )

    spec = LambdaDeployment(function=function, memory_mb=memory, timeout_s=timeout,
                            provisioned=provisioned, name=name, image=image,
                            repository=repository, role_arn=role, alias=alias,
                            push_registry=push_registry)
    columns = (TextColumn("[bold]{task.description:<24}"), BarColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn())
    try:
        docker_client = _docker_client()
        with Progress(*columns, console=console) as progress:
            deployer = LambdaDeployer(boto3.session.Session(region_name=region), docker_client,
                                      progress=_deploy_progress(progress))
            deployed = deployer.deploy(spec)
    except DeployError as exc:
        console.print(f"[red]deploy failed:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"function  {deployed.function_arn}\nalias     [bold]{deployed.alias_arn}"
                  f"[/bold] (version {deployed.version})\nimage     {deployed.image_uri}")
    console.print("\nTo place the faasrl function on it, add to its manifest:")
    console.print(manifest_section(deployed, spec), highlight=False, markup=False)


def _docker_client() -> Any:
    import docker
    from docker.errors import DockerException

    from faasrl.lambda_deploy import DeployError

    try:
        return docker.from_env()
    except DockerException as exc:
        raise DeployError(f"Docker engine: {exc}") from exc


def _deploy_progress(progress: Progress) -> Any:
    """A deploy step's report as one progress row per step (the push with its bytes)."""
    tasks: dict[str, Any] = {}

    def report(step: str, detail: dict[str, Any]) -> None:
        if step not in tasks:
            for task in tasks.values():  # steps run in order: a new one ends the last
                progress.update(task, total=1, completed=1)
            tasks[step] = progress.add_task(step, total=None, info="")
        if "total" in detail and "bytes" in detail:
            progress.update(tasks[step], total=detail["total"], completed=detail["bytes"],
                            info=f"{detail['bytes'] / 1e6:.1f} / {detail['total'] / 1e6:.1f} MB")
        else:
            info = "  ".join(f"{k} {v}" for k, v in detail.items() if k != "done")
            progress.update(tasks[step], info=info)

    return report
