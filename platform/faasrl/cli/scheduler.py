"""``faasrl scheduler``: train, list and delete saved MinionsRL schedulers."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from faasrl.cli.app import console
from faasrl.cli.jobs import read_spec
from faasrl.config import Settings

scheduler_app = typer.Typer(help="MinionsRL schedulers: train, ls, rm.", no_args_is_help=True)


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

    from faasrl.controllers.saved_schedulers import (
        SchedulerNotFound,
        load_scheduler,
        save_scheduler,
    )
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
    body = read_spec(spec) if spec else {"env_id": env, "evaluation_episodes": 0}
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
    from faasrl.controllers.saved_schedulers import list_schedulers

    table = Table("name", "I_max", "trained on", "episodes", "from", "training s")
    for m in list_schedulers(Settings().scheduler_folder):
        table.add_row(m["name"], str(m.get("i_max")), str(m.get("trained_on")),
                      str(m.get("episodes")), str(m.get("base") or "-"),
                      f"{m.get('training_wall_s', 0):.1f}")
    console.print(table)


@scheduler_app.command("rm")
def scheduler_rm(name: str) -> None:
    """Delete a saved scheduler."""
    from faasrl.controllers.saved_schedulers import SchedulerNotFound, delete_scheduler

    try:
        delete_scheduler(Settings().scheduler_folder, name)
    except (SchedulerNotFound, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="NAME") from None
    console.print(f"deleted scheduler {name}")
