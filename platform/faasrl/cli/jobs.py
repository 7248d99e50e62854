"""``faasrl submit``, ``run``, ``jobs`` and ``plot``: training jobs and their progress."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    track,
)
from rich.table import Table

from faasrl import round_row as rr
from faasrl.cli.app import connect, console
from faasrl.client import Client, env_code_dir
from faasrl.code_archive import ArchiveError
from faasrl.config import Settings
from faasrl.jobs.clock import replay_differences
from faasrl.user_input import load_yaml

jobs_app = typer.Typer(help="Training jobs: list (no command), show, cancel, resume, replay, "
                            "rm, export, serve.",
                       invoke_without_command=True)


def read_spec(path: Path) -> dict[str, Any]:
    """A job spec file (YAML or JSON) as a mapping; a bad one is the SPEC argument's error,
    as is an ``env.code_dir`` (relative to the file) that is no folder."""
    try:
        spec = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="SPEC") from None
    if not isinstance(spec, dict):
        raise typer.BadParameter(f"{path}: a job spec is a mapping", param_hint="SPEC")
    try:
        env_code_dir(spec, path.parent)
    except ArchiveError as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="SPEC") from None
    return spec


# What a submit waits for: the gateway has the actor function describe the env first.
DESCRIBING = "submitting: an actor function checks the env (seconds when its container is cold)"


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


# A job's bounds (its spec's ``stop``): the metrics row's count toward each, its number format
# and unit.
BOUNDS: tuple[tuple[str, Callable[[dict[str, Any]], float], str, str], ...] = (
    ("max_rounds", lambda row: row[rr.ROUND] + 1, "{:,.0f}", " rounds"),
    ("max_env_steps", lambda row: row[rr.TOTAL_ENV_STEPS], "{:,.0f}", " env steps"),
    ("budget_usd", lambda row: row[rr.COST_TOTAL], "${:.4f}", ""),
    ("max_wall_s", lambda row: row[rr.WALL_S], "{:,.0f}", " s"),
)


def nearest_bound(stop: dict[str, Any], row: dict[str, Any]) -> tuple[float | None, str]:
    """How far the job of ``row`` is toward the bound it is nearest to (0 to 1; None when only
    a target ends it), and that bound's count against its limit: the job stops at the first
    bound it meets, so a bar of rounds alone ends short when env steps or cost end it."""
    reached = [(min(1.0, count(row) / stop[key]),
                f"{fmt.format(count(row))}/{fmt.format(stop[key])}{unit}")
               for key, count, fmt, unit in BOUNDS if stop.get(key) is not None]
    if not reached:
        return None, f"{row[rr.ROUND] + 1:,} rounds"
    return max(reached, key=lambda r: r[0])


def _follow(client: Client, job_id: str) -> dict[str, Any]:
    """Show a job's rounds as a progress bar toward its nearest bound until it ends, then why
    it ended; returns the final record."""
    job = client.job(job_id)
    stop = job["spec"]["stop"]
    final: dict[str, Any] = job
    columns = (TextColumn("[bold]{task.description}"), BarColumn(),
               TextColumn("{task.fields[bound]}"), TextColumn("{task.fields[info]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"{job['spec']['env_id']} {job_id}", total=None, bound="",
                                 info="starting")
        for event, data in client.job_events(job_id):
            if event == "round":
                fraction, bound = nearest_bound(stop, data)
                progress.update(task, total=None if fraction is None else 1.0,
                                completed=fraction or 0.0, bound=bound, info=(
                    f"steps {data['total_env_steps']:>9,}  return "
                    f"{_num(data['recent_mean_return']):>7}  actors {data['actors']}  "
                    f"cost ${data['cost_total']:.4f}"))
            elif event == "end":
                final = data
        ended = f"{final['status']}: {final.get('stop_reason') or final.get('error') or ''}"
        if final["status"] == "succeeded":  # whichever bound or target ended it: complete
            rounds = f"{final['round']:,}"
            progress.update(task, total=1.0, completed=1.0, bound=f"{rounds}/{rounds} rounds",
                            info=ended)
        else:
            progress.update(task, info=ended)
    return final


def _evaluation_lines(job: dict[str, Any]) -> list[str]:
    """The final evaluation, on held-out seeds: what the job reports. The confirmation (its
    seeds reused by every attempt) is shown apart: its mean decided the stop, so it reads high.
    """
    lines = []
    if conf := job.get("confirmation"):
        lines.append(f"confirmation mean {conf['mean']:.1f} over {conf['episodes']} episodes "
                     f"(version {conf['version']})")
    if ev := job.get("evaluation"):
        lines.append(f"evaluation  held-out: mean {ev['mean']:.1f} ± {ev['std']:.1f} over "
                     f"{ev['episodes']} episodes (min {ev['min']:.0f}, max {ev['max']:.0f})")
    return lines


def _serving_lines(job: dict[str, Any]) -> list[str]:
    """Where the spec's serve rule last published the policy, where the alias points (moved
    by hand: the rule leaves it), and why a try failed."""
    if not (s := job.get("serving")):
        return []
    newest, alias = s["function_version"], s["alias_version"]
    if newest is None:
        at = "nothing published yet"
    elif alias == newest:
        at = f"version {newest} (model version {s['model_version']})"
    else:
        at = f"version {alias}, held by hand (newest: {newest}, model version " \
             f"{s['model_version']})"
    failed = f"   last try failed: {s['error']}" if s.get("error") else ""
    return [f"serving     {s['function']}:{s['alias']} -> {at}{failed}"]


def _rounds_line(job: dict[str, Any]) -> str:
    """Rounds, env steps, env restarts where there were any (episodes cut short), wall."""
    restarts = job.get("env_restarts", 0)
    lost = f"   env restarts {restarts}" if restarts else ""
    return f"rounds      {job['round']}   env steps {job['env_steps']:,}{lost}   " \
           f"wall {job['wall_s']:.1f} s"


def _summary(job: dict[str, Any]) -> None:
    why = job.get("held") or job.get("stop_reason") or job.get("error") or ""
    lines = [f"status      {job['status']}: {why}",
             _rounds_line(job),
             f"cost        serverless ${job['cost_usd']:.4f}   serverful (same run) "
             f"${job['serverful_cost_usd']:.4f}",
             f"modeled     parallel, no waits for a core: wall {job['parallel_wall_s']:.1f} s"
             f"   cost ${job['parallel_cost_usd']:.4f}",
             *_evaluation_lines(job), *_serving_lines(job)]
    console.print(Panel("\n".join(lines), title=f"job {job['id']}", expand=False))


def submit(
    spec: Annotated[Path, typer.Argument(help="job spec (YAML or JSON)")],
    follow: Annotated[bool, typer.Option(help="show progress until the job ends")] = False,
) -> None:
    """Submit a training job."""
    body = read_spec(spec)
    with connect() as client:
        with console.status(DESCRIBING):
            job = client.submit(body, base=spec.parent)
        console.print(f"submitted job [bold]{job['id']}[/bold]")
        if follow:
            _summary(_follow(client, job["id"]))


def run(
    spec: Annotated[Path, typer.Argument(help="job spec (YAML or JSON)")],
    state_dir: Annotated[Path | None, typer.Option(help="default: a temporary folder")] = None,
) -> None:
    """Run a job start to finish on an embedded platform started for it, then stop it."""
    from faasrl.embedded import EmbeddedPlatform

    body = read_spec(spec)
    with tempfile.TemporaryDirectory(prefix="faasrl-") as tmp:
        settings = Settings(state_dir=state_dir or Path(tmp), port=0, resume_jobs=False)
        with console.status("starting the platform (embedded Redis, gateway, invoker)"):
            platform = EmbeddedPlatform(settings).start()
        try:
            with platform.client() as client:
                with console.status(DESCRIBING):
                    job = client.submit(body, base=spec.parent)
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
    with connect() as client:
        jobs = client.jobs()
    table = Table("id", "env", "status", "round", "env steps", "return", "eval", "cost $")
    for j in jobs:
        ev = j.get("evaluation")
        last = j.get("last_row") or {}
        table.add_row(j["id"], j["spec"]["env_id"], j["status"], str(j["round"]),
                      f"{j['env_steps']:,}", _num(last.get(rr.RECENT_MEAN_RETURN)),
                      _num(ev["mean"] if ev else None), f"{j['cost_usd']:.4f}")
    console.print(table)


@jobs_app.command("show")
def jobs_show(job_id: str) -> None:
    """A job's status, cost, target confirmation and held-out evaluation."""
    with connect() as client:
        _summary(client.job(job_id))


@jobs_app.command("cancel")
def jobs_cancel(job_id: str) -> None:
    """Stop a job; it can be resumed later."""
    with connect() as client:
        console.print(f"job {job_id}: {client.cancel_job(job_id)['status']}")


@jobs_app.command("resume")
def jobs_resume(job_id: str, follow: bool = False) -> None:
    """Continue a cancelled, failed or interrupted job from its last round."""
    with connect() as client:
        client.resume_job(job_id)
        console.print(f"job {job_id}: resumed")
        if follow:
            _summary(_follow(client, job_id))


@jobs_app.command("replay")
def jobs_replay(job_id: str) -> None:
    """Run a virtual-clock job again from its spec and check that every row comes out the
    same (but for the columns that measure the host); exits 1 where one does not."""
    with connect() as client:
        job = client.job(job_id)
        if job["spec"].get("clock") != "virtual":
            console.print(f"job {job_id} ran on real time: what it learned depends on the "
                          "host's timing, so it cannot be replayed (give it clock: virtual)")
            raise typer.Exit(2)
        again = client.submit(job["spec"])["id"]
        console.print(f"job {job_id}: replaying as {again}")
        final = _follow(client, again)
        if final["status"] != "succeeded":
            console.print(f"replay {again} {final['status']}: {final.get('error')}")
            raise typer.Exit(1)
        replayed = client.job_metrics(again)
        differences = replay_differences(client.job_metrics(job_id), replayed)
        if differences:
            console.print(f"replay {again} differs from {job_id}:")
            for line in differences[:20]:
                console.print(f"  {line}")
            raise typer.Exit(1)
        console.print(f"replay {again}: all {len(replayed)} rows as {job_id}'s")


@jobs_app.command("rm")
def jobs_rm(job_id: str) -> None:
    """Delete a job and all its data."""
    with connect() as client:
        client.delete_job(job_id)
        console.print(f"deleted job {job_id}")


def _save_video(client: Client, job_id: str, shown: dict[str, Any], out: Path | None) -> None:
    out = out or Path(f"{job_id}-{shown['n']}.mp4")
    out.write_bytes(client.video(job_id, shown["n"]))
    console.print(f"wrote video {shown['n']} (version {shown['version']}, "
                  f"{shown['frames']} frames, {shown['width']}x{shown['height']}, return "
                  f"{shown['episode_return']:.1f}) to {out}")


@jobs_app.command("video")
def jobs_video(
    job_id: str,
    n: Annotated[int | None, typer.Option(help="which video (default: the newest)")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="the mp4 file "
                                                "(default: JOB-N.mp4)")] = None,
) -> None:
    """Download a job's video (its final evaluation's, or one played with 'jobs play')."""
    with connect() as client:
        videos = client.videos(job_id)
        if not videos:
            why = (client.job(job_id).get("video") or {}).get("message")
            raise typer.BadParameter(f"job {job_id} has no videos" + (f": {why}" if why else
                                     " (spec evaluation.video, or 'faasrl jobs play')"),
                                     param_hint="JOB_ID")
        chosen = videos[-1] if n is None else next((v for v in videos if v["n"] == n), None)
        if chosen is None:
            raise typer.BadParameter(f"job {job_id} has no video {n}", param_hint="--n")
        _save_video(client, job_id, chosen, output)


@jobs_app.command("play")
def jobs_play(
    job_id: str,
    version: Annotated[int | None, typer.Option(help="a kept model version (default: the "
                                                     "latest)")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="the mp4 file "
                                                "(default: JOB-N.mp4)")] = None,
) -> None:
    """Record one episode of a stored model version on video now, and download it."""
    with connect() as client, Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                       TimeElapsedColumn(), console=console,
                                       transient=True) as progress:
        progress.add_task(f"recording an episode of job {job_id}", total=None)
        shown = client.play(job_id, version)
        progress.stop()
        _save_video(client, job_id, shown, output)


@jobs_app.command("export")
def jobs_export(
    job_id: str,
    tensorboard: Annotated[Path | None, typer.Option(
        help="folder for TensorBoard event files (one scalar per metrics column, step = env "
             "steps)")] = None,
    model: Annotated[Path | None, typer.Option(
        help="file for the policy (safetensors that describes itself)")] = None,
    onnx: Annotated[Path | None, typer.Option(
        help="file for the policy's acting network as ONNX (preprocessing in the graph, the "
             "model card in its metadata)")] = None,
    version: Annotated[int | None, typer.Option(
        min=0, help="the model version for --model/--onnx (default: the latest)")] = None,
) -> None:
    """Write a job's metrics rows as TensorBoard event files, and/or its model (safetensors,
    ONNX)."""
    files = {"safetensors": model, "onnx": onnx}
    if tensorboard is None and not any(files.values()):
        raise typer.BadParameter("give --tensorboard DIR, --model FILE, --onnx FILE or more",
                                 param_hint="--tensorboard/--model/--onnx")
    with connect() as client:
        job = client.job(job_id)
        rows = client.job_metrics(job_id) if tensorboard is not None else []
        # The latest as the record has it: both files are of one version, however the job runs.
        version = job["version"] if version is None else version
        for format, path in files.items():
            if path is not None:
                path.write_bytes(client.model(job_id, version, format))
                console.print(f"wrote the policy's version {version} ({format}) to {path}")
    if tensorboard is not None:
        if not rows:
            raise typer.BadParameter(f"job {job_id} has no rounds yet", param_hint="JOB_ID")
        from faasrl.jobs.tensorboard import export_rows  # tensorboard loads only for this

        n = export_rows(track(rows, description="writing rounds", console=console),
                        tensorboard, job["started_at"] or job["created_at"])
        console.print(f"wrote {n} rounds to {tensorboard}; view them with "
                      f"'tensorboard --logdir {tensorboard}'")


@jobs_app.command("serve")
def jobs_serve(
    job_id: str,
    version: Annotated[int | None, typer.Option(
        min=0, help="the model version to serve (a kept one); default: the latest")] = None,
    name: Annotated[str | None, typer.Option(
        help="the function's name; default: <job id>-policy")] = None,
) -> None:
    """Deploy a function serving the job's policy: invoke it with {"obs": ...}."""
    with connect() as client:
        out = client.serve_job(job_id, version, name)
    table = Table(show_header=False, box=None)
    for key in ("function", "job", "version"):
        table.add_row(key, str(out[key]))
    console.print(table)
    verb = "replaced" if out["replaced"] else "deployed"
    console.print(f"{verb}; try: faasrl invoke {out['function']} --json '{{\"obs\": ...}}'")


def plot(
    job_id: Annotated[str, typer.Argument(help="job id")],
    out: Annotated[Path, typer.Option("-o", "--out", help="image file")] = Path("curve.png"),
) -> None:
    """Plot a job's learning curves, actors per round and cumulative cost."""
    from faasrl.plot import plot_job

    with connect() as client:
        job, rows = client.job(job_id), client.job_metrics(job_id)
    if not rows:
        raise typer.BadParameter(f"job {job_id} has no rounds yet", param_hint="JOB_ID")
    console.print(f"wrote {plot_job(job, rows, out)}")
