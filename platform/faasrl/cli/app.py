"""The root ``faasrl`` command, its global options and what every command shares."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console

from faasrl.client import Client

app = typer.Typer(help="faasrl: a serverless-style FaaS platform for distributed deep RL.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console()
_target: dict[str, str | None] = {"url": None, "token": None}


@app.callback()
def _options(
    url: Annotated[str | None, typer.Option(envvar="FAASRL_URL", help="gateway URL")] = None,
    token: Annotated[str | None, typer.Option(envvar="FAASRL_TOKEN", help="bearer token")] = None,
) -> None:
    _target.update(url=url, token=token)


def given_token() -> str | None:
    """The token given by --token or FAASRL_TOKEN, if any."""
    return _target["token"]


def connect() -> Client:
    """A client of the gateway given by --url/--token, else of the one found running."""
    return Client.discover(_target["url"], _target["token"])


def local_time(epoch: float) -> str:
    """An epoch time as the CLI's tables and logs print it: the local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
