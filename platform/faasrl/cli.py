"""The ``faasrl`` command: start the platform, manage functions, invoke them, look at the node."""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import SecretStr
from rich.console import Console
from rich.logging import RichHandler
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from faasrl.client import Client, GatewayError
from faasrl.config import Settings
from faasrl.inputs import load_yaml
from faasrl.manifest import ManifestError

app = typer.Typer(help="faasrl: a serverless-style FaaS platform for distributed deep RL.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
functions_app = typer.Typer(help="Register, list and delete functions.", no_args_is_help=True)
app.add_typer(functions_app, name="functions")
jobs_app = typer.Typer(help="Training jobs: list (no command), show, cancel, resume, rm.",
                       invoke_without_command=True)
app.add_typer(jobs_app, name="jobs")
deploy_app = typer.Typer(help="Deploy functions elsewhere: lambda (AWS Lambda).",
                         no_args_is_help=True)
app.add_typer(deploy_app, name="deploy")
scheduler_app = typer.Typer(help="MinionsRL schedulers: train, ls, rm.", no_args_is_help=True)
app.add_typer(scheduler_app, name="scheduler")
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

    Binds 127.0.0.1 and requires a bearer token: FAASRL_TOKEN, else the one made at the first
    start and kept in the state dir (printed then; `faasrl token` prints it again).
    Ctrl-C stops every container and Redis.
    """
    from faasrl.data.connection import without_credentials
    from faasrl.embedded import EmbeddedPlatform

    overrides: dict[str, Any] = {k: v for k, v in
                                 {"host": host, "port": port, "state_dir": state_dir}.items()
                                 if v is not None}
    settings = Settings(**overrides)
    if no_auth:
        settings = settings.model_copy(update={"token": None})
        token_line = "auth     off (--no-auth)"
    elif settings.token is not None and settings.token.get_secret_value():
        token_line = "token    FAASRL_TOKEN's"
    else:
        kept, made = _kept_token(settings.state_dir)
        settings = settings.model_copy(update={"token": SecretStr(kept)})
        where = _token_file(settings.state_dir)
        token_line = (f"token    {kept}   (new)" if made else
                      f"token    in {where}   (faasrl token)")
    logging.basicConfig(level=logging.INFO, format="%(message)s",
                        handlers=[RichHandler(console=console, show_path=False)])
    platform = EmbeddedPlatform(settings, access_log=access_log)
    # Stop cleanly on SIGTERM too, and on SIGINT even when started in the background (where
    # the shell leaves SIGINT ignored); from the start on, since a client that finds the
    # gateway file may signal before the panel is printed.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with console.status("starting the platform"):
            platform.start()
        lines = [f"gateway  {platform.url}   (API docs at {platform.url}/docs)",
                 # Never the password (the embedded Redis has one; a compose gateway reads one).
                 f"redis    {without_credentials(platform.redis_url or '')}"
                 + ("  (embedded)" if platform.redis else ""),
                 f"state    {settings.state_dir}",
                 token_line,
                 "", "Ctrl-C stops every container and Redis."]
        console.print(Panel("\n".join(lines), title="faasrl is up", expand=False))
        platform.wait()
    except KeyboardInterrupt:
        console.print("stopping: containers, gateway, Redis")
    finally:
        platform.stop()


def _token_file(state_dir: Path) -> Path:
    """Where ``faasrl up`` keeps the token it made, for its next starts and ``faasrl token``."""
    return state_dir / "token"


def _kept_token(state_dir: Path) -> tuple[str, bool]:
    """The token kept in ``state_dir``, made (mode 0600) when there is none; and whether it is
    new. Written beside and linked into place, so a reader never sees half a token."""
    path = _token_file(state_dir)
    for _ in range(2):
        try:
            kept: str | None = path.read_text().strip()
        except FileNotFoundError:
            kept = None
        if kept:
            return kept, False
        state_dir.mkdir(parents=True, exist_ok=True)
        if kept == "":
            path.unlink(missing_ok=True)  # an empty file counts as none
        made = secrets.token_urlsafe(24)
        fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=".token.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(made + "\n")
            os.link(tmp, path)
        except FileExistsError:
            continue  # another start made one first: read it
        finally:
            os.unlink(tmp)
        return made, True
    raise SystemExit(f"error: could not read or make the token in {path}")


@app.command()
def token(
    state_dir: Annotated[Path | None, typer.Option(help="the platform's state dir "
                                                       "[FAASRL_STATE_DIR, ~/.faasrl]")] = None,
) -> None:
    """Print the bearer token: FAASRL_TOKEN (or --token) when set, else the one `faasrl up`
    made at its first start and keeps in its state dir.

    In the compose cluster: docker compose exec gateway faasrl token
    """
    if _target["token"]:
        print(_target["token"])
        return
    path = _token_file(state_dir or Settings().state_dir)
    kept = path.read_text().strip() if path.is_file() else ""
    if not kept:
        console.print(f"[red]error:[/red] no token in {path}: `faasrl up` makes one at its first "
                      "start (or set FAASRL_TOKEN)")
        raise typer.Exit(1)
    print(kept)


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


# --------------------------------------------------------------------------- jobs
def _read_spec(path: Path) -> dict[str, Any]:
    try:
        spec = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="SPEC") from None
    if not isinstance(spec, dict):
        raise typer.BadParameter(f"{path}: a job spec is a mapping", param_hint="SPEC")
    return spec


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _follow(client: Client, job_id: str) -> dict[str, Any]:
    """Show a job's rounds as a progress bar until it ends; returns the final record."""
    job = client.job(job_id)
    stop = job["spec"]["stop"]
    final: dict[str, Any] = job
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"{job['spec']['env_id']} {job_id}",
                                 total=stop.get("max_rounds"), info="starting")
        for event, data in client.job_events(job_id):
            if event == "round":
                progress.update(task, completed=data["round"] + 1, info=(
                    f"steps {data['total_env_steps']:>9,}  return "
                    f"{_num(data['recent_mean_return']):>7}  actors {data['actors']}  "
                    f"cost ${data['cost_total']:.4f}"))
            elif event == "end":
                final = data
    return final


def _summary(job: dict[str, Any]) -> None:
    ev = job.get("evaluation")
    lines = [f"status      {job['status']}: {job.get('stop_reason') or job.get('error') or ''}",
             f"rounds      {job['round']}   env steps {job['env_steps']:,}   "
             f"wall {job['wall_s']:.1f} s",
             f"cost        serverless ${job['cost_usd']:.4f}   serverful (same run) "
             f"${job['serverful_cost_usd']:.4f}"]
    if ev:
        lines.append(f"evaluation  mean return {ev['mean']:.1f} ± {ev['std']:.1f} over "
                     f"{ev['episodes']} episodes (min {ev['min']:.0f}, max {ev['max']:.0f})")
    console.print(Panel("\n".join(lines), title=f"job {job['id']}", expand=False))


@app.command()
def submit(
    spec: Annotated[Path, typer.Argument(help="job spec (YAML or JSON)")],
    follow: Annotated[bool, typer.Option(help="show progress until the job ends")] = False,
) -> None:
    """Submit a training job."""
    with _client() as client:
        job = client.submit(_read_spec(spec))
        console.print(f"submitted job [bold]{job['id']}[/bold]")
        if follow:
            _summary(_follow(client, job["id"]))


@app.command()
def run(
    spec: Annotated[Path, typer.Argument(help="job spec (YAML or JSON)")],
    state_dir: Annotated[Path | None, typer.Option(help="default: a temporary folder")] = None,
) -> None:
    """Run a job start to finish on an embedded platform started for it, then stop it."""
    from faasrl.embedded import EmbeddedPlatform

    body = _read_spec(spec)
    with tempfile.TemporaryDirectory(prefix="faasrl-") as tmp:
        settings = Settings(state_dir=state_dir or Path(tmp), port=0, resume_jobs=False)
        with console.status("starting the platform (embedded Redis, gateway, invoker)"):
            platform = EmbeddedPlatform(settings).start()
        try:
            with platform.client() as client:
                job = client.submit(body)
                console.print(f"platform up at {platform.url}; job [bold]{job['id']}[/bold]: "
                              f"{job['spec']['algorithm'].upper()} on {job['spec']['env_id']}")
                job = _follow(client, job["id"])
        finally:
            with console.status("stopping: containers, gateway, Redis"):
                platform.stop()
    _summary(job)
    if job["status"] != "succeeded":
        raise typer.Exit(1)


@jobs_app.callback()
def jobs_ls(ctx: typer.Context) -> None:
    """List training jobs."""
    if ctx.invoked_subcommand is not None:
        return
    with _client() as client:
        jobs = client.jobs()
    table = Table("id", "env", "status", "round", "env steps", "return", "eval", "cost $")
    for j in jobs:
        ev = j.get("evaluation")
        last = j.get("last_row") or {}
        table.add_row(j["id"], j["spec"]["env_id"], j["status"], str(j["round"]),
                      f"{j['env_steps']:,}", _num(last.get("recent_mean_return")),
                      _num(ev["mean"] if ev else None), f"{j['cost_usd']:.4f}")
    console.print(table)


@jobs_app.command("show")
def jobs_show(job_id: str) -> None:
    """A job's status, cost and evaluation."""
    with _client() as client:
        _summary(client.job(job_id))


@jobs_app.command("cancel")
def jobs_cancel(job_id: str) -> None:
    """Stop a job; it can be resumed later."""
    with _client() as client:
        console.print(f"job {job_id}: {client.cancel_job(job_id)['status']}")


@jobs_app.command("resume")
def jobs_resume(job_id: str, follow: bool = False) -> None:
    """Continue a cancelled, failed or interrupted job from its last round."""
    with _client() as client:
        client.resume_job(job_id)
        console.print(f"job {job_id}: resumed")
        if follow:
            _summary(_follow(client, job_id))


@jobs_app.command("rm")
def jobs_rm(job_id: str) -> None:
    """Delete a job and all its data."""
    with _client() as client:
        client.delete_job(job_id)
        console.print(f"deleted job {job_id}")


@app.command()
def plot(
    job_id: Annotated[str, typer.Argument(help="job id")],
    out: Annotated[Path, typer.Option("-o", "--out", help="image file")] = Path("curve.png"),
) -> None:
    """Plot a job's learning curves, actors per round and cumulative cost."""
    from faasrl.plot import plot_job

    with _client() as client:
        job, rows = client.job(job_id), client.job_metrics(job_id)
    if not rows:
        raise typer.BadParameter(f"job {job_id} has no rounds yet", param_hint="JOB_ID")
    console.print(f"wrote {plot_job(job, rows, out)}")


# ------------------------------------------------------------------------- deploy
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


# ---------------------------------------------------------------------- schedulers
@scheduler_app.command("train")
def scheduler_train(
    name: Annotated[str, typer.Argument(help="save as <schedulers dir>/NAME")],
    env: Annotated[str | None, typer.Option(help="train on whole jobs on this env")] = None,
    spec: Annotated[Path | None, typer.Option(help="job spec for the episodes (its "
                                                   "controller is replaced)")] = None,
    simulated: Annotated[bool, typer.Option(help="train on the simulated workload")] = False,
    episodes: Annotated[int, typer.Option(min=1, help="episodes (whole jobs)")] = 100,
    base: Annotated[str | None, typer.Option("--from", help="fine-tune this scheduler")] = None,
    i_max: Annotated[int, typer.Option(min=1, max=1024, help="largest I_k")] = 32,
    beta: Annotated[float, typer.Option(help="reward -beta * round seconds")] = 0.1,
    eta: Annotated[float, typer.Option(help="... - eta * round cost (USD)")] = 0.0,
    target: Annotated[float | None, typer.Option(help="stop.target_reward (J)")] = None,
    budget: Annotated[float | None, typer.Option(help="stop.budget_usd (B)")] = None,
    max_rounds: Annotated[int, typer.Option(min=1, help="rounds per episode at most")] = 100,
    per_update: Annotated[int, typer.Option(min=1, help="episodes per PPO update")] = 2,
    seed: Annotated[int, typer.Option(help="scheduler and job seeds")] = 0,
) -> None:
    """Train (or fine-tune) a MinionsRL scheduler by running whole training jobs on an embedded
    platform, or on the simulated workload; saves it after every episode."""
    import torch

    from faasrl.controllers.schedulers import SchedulerNotFound, load_scheduler, save_scheduler
    from faasrl.embedded import EmbeddedPlatform
    from faasrl.scheduler_training.train import (
        SchedulerTrainer,
        TrainingConfig,
        job_episodes,
        simulated_episodes,
    )
    from faasrl.scheduler_training.workload import SimulatedWorkload

    if (env is None and spec is None) == (not simulated):
        raise typer.BadParameter("give --env or --spec (whole jobs), or --simulated",
                                 param_hint="--env")
    torch.set_num_threads(1)
    folder = Settings().scheduler_folder
    weights = None
    if base is not None:
        try:
            weights, base_meta = load_scheduler(folder, base)
        except (SchedulerNotFound, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--from") from None
        i_max = int(base_meta["i_max"])
    trainer = SchedulerTrainer(TrainingConfig(i_max=i_max, beta=beta, eta=eta,
                                              episodes_per_update=per_update, seed=seed), weights)
    stop = {"max_rounds": max_rounds, "target_reward": target, "budget_usd": budget}
    body = _read_spec(spec) if spec else {"env_id": env, "evaluation_episodes": 0}
    body["stop"] = {**body.get("stop", {}), **{k: v for k, v in stop.items() if v is not None}}
    trained_on = "simulated" if simulated else body["env_id"]

    def meta() -> dict[str, Any]:
        return trainer.meta(trained_on=trained_on, base=base, stop=body["stop"])

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"scheduler {name}", total=episodes, info="")

        def on_episode(i: int, ep: Any, ret: float) -> None:
            progress.update(task, completed=i + 1, info=(
                f"return {ret:8.3f}  rounds {len(ep.rows):>4}  "
                f"{'reached' if ep.reached else 'missed'}"))

        if simulated:
            workload = SimulatedWorkload(max_rounds=max_rounds, budget_usd=budget,
                                         **({"target": target} if target else {}))
            trainer.train(simulated_episodes(workload, seed), episodes, on_episode)
        else:
            with tempfile.TemporaryDirectory(prefix="faasrl-") as tmp:
                settings = Settings(state_dir=Path(tmp), port=0, resume_jobs=False,
                                    schedulers_dir=folder)
                platform = EmbeddedPlatform(settings).start()
                try:
                    with platform.client() as client:
                        trainer.train(job_episodes(client, body, name, folder, meta), episodes,
                                      on_episode)
                finally:
                    platform.stop()
    path = save_scheduler(folder, name, trainer.weights(), meta())
    console.print(f"saved scheduler [bold]{name}[/bold] ({path}); {episodes} episodes in "
                  f"{trainer.wall_s:.1f} s, mean return of the last 10 "
                  f"{sum(trainer.returns[-10:]) / len(trainer.returns[-10:]):.3f}")


@scheduler_app.command("ls")
def scheduler_ls() -> None:
    """Saved schedulers."""
    from faasrl.controllers.schedulers import list_schedulers

    table = Table("name", "I_max", "trained on", "episodes", "from", "training s")
    for m in list_schedulers(Settings().scheduler_folder):
        table.add_row(m["name"], str(m.get("i_max")), str(m.get("trained_on")),
                      str(m.get("episodes")), str(m.get("base") or "-"),
                      f"{m.get('training_wall_s', 0):.1f}")
    console.print(table)


@scheduler_app.command("rm")
def scheduler_rm(name: str) -> None:
    """Delete a saved scheduler."""
    from faasrl.controllers.schedulers import SchedulerNotFound, delete_scheduler

    try:
        delete_scheduler(Settings().scheduler_folder, name)
    except (SchedulerNotFound, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="NAME") from None
    console.print(f"deleted scheduler {name}")
