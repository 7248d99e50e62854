"""``faasrl up``, ``token`` and ``status``: start the platform, its token, what it runs."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr, ValidationError
from rich.logging import RichHandler
from rich.panel import Panel
from rich.table import Table

from faasrl.cli.app import connect, console, given_token
from faasrl.config import Settings


def up(
    host: Annotated[str | None, typer.Option(help="bind address [127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="gateway port [8080]")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="pids, logs, Redis data")] = None,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="serve /v1 without a token")] = False,
    access_log: Annotated[bool, typer.Option(help="log every request")] = False,
    backend: Annotated[str | None, typer.Option(
        help="where containers run: process, docker or ray [FAASRL_BACKEND, process]")] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="the Ray cluster (head host:port) for --backend ray [FAASRL_RAY_ADDRESS]; "
             "none: a local one-node cluster")] = None,
) -> None:
    """Start the platform: embedded Redis (unless FAASRL_REDIS_URL), gateway and invoker.

    Binds 127.0.0.1 and requires a bearer token: FAASRL_TOKEN, else the one made at the first
    start and kept in the state dir (printed then; `faasrl token` prints it again).
    Ctrl-C stops every container and Redis.
    """
    from faasrl.data.connection import without_credentials
    from faasrl.embedded import EmbeddedPlatform, PlatformError

    overrides: dict[str, Any] = {k: v for k, v in
                                 {"host": host, "port": port, "state_dir": state_dir,
                                  "backend": backend, "ray_address": ray_address}.items()
                                 if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise typer.BadParameter(fields) from None
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
                 f"ui       {platform.url}/ui/   (the dashboard)",
                 # Never the password (the embedded Redis has one; a compose gateway reads one).
                 f"redis    {without_credentials(platform.redis_url or '')}"
                 + ("  (embedded)" if platform.redis else ""),
                 f"state    {settings.state_dir}",
                 f"backend  {settings.backend}" + (
                     f"   (Ray cluster {settings.ray_address or 'local'})"
                     if settings.backend == "ray" else ""),
                 token_line,
                 "", "Ctrl-C stops every container and Redis."]
        console.print(Panel("\n".join(lines), title="faasrl is up", expand=False))
        platform.wait()
    except PlatformError as exc:  # it cannot start: say why, without a traceback
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
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


def token(
    state_dir: Annotated[Path | None, typer.Option(help="the platform's state dir "
                                                       "[FAASRL_STATE_DIR, ~/.faasrl]")] = None,
) -> None:
    """Print the bearer token: FAASRL_TOKEN (or --token) when set, else the one `faasrl up`
    made at its first start and keeps in its state dir.

    In the compose cluster: docker compose exec gateway faasrl token
    """
    if given := given_token():
        print(given)
        return
    path = _token_file(state_dir or Settings().state_dir)
    kept = path.read_text().strip() if path.is_file() else ""
    if not kept:
        console.print(f"[red]error:[/red] no token in {path}: `faasrl up` makes one at its first "
                      "start (or set FAASRL_TOKEN)")
        raise typer.Exit(1)
    print(kept)


def status() -> None:
    """Capacity of the node, and containers per function by state."""
    with connect() as client:
        health, cluster = client.health(), client.cluster()
    cap, res = cluster["capacity"], cluster["reserved"]
    zygote = f"zygote {cluster['zygote']}  " if cluster.get("zygote") else ""
    if missing := cluster.get("zygote_not_preloaded"):
        zygote += f"(not preloaded: {', '.join(missing)})  "
    console.print(f"[bold]{client.url}[/bold]  redis {health['redis']}  "
                  f"backend {cluster['backend']}  {zygote}"
                  f"cpu {res['cpu']:g}/{cap['cpu']:g}  memory {res['memory_mb']}/"
                  f"{cap['memory_mb']} MB  gpus {res['gpus']}/{cap['gpus']}")
    table = Table("function", "starting", "idle", "busy", "stopping", "queued")
    for name, pool in sorted(cluster["functions"].items()):
        states = [c["state"] for c in pool["containers"]]
        table.add_row(name, *(str(states.count(s)) for s in
                              ("starting", "idle", "busy", "stopping")), str(pool["queued"]))
    console.print(table)
    memory, records = health["memory"], health["records"]
    shares = ", ".join(f"{k} {v:.0%}" for k, v in memory["shares"].items()) or "not measured"
    state = ("[bold red]shedding[/bold red]: new async invocations and pre-warming refused"
             if memory["state"] == "shedding" else "ok")
    console.print(f"memory {state} ({shares} used; sheds at {memory['shed_at']:.0%})  records "
                  f"{records['in_redis']:,} in Redis, {records['redis_mb']:g}/"
                  f"{records['redis_max_mb']:g} MB, {records['archived']:,} archived")
