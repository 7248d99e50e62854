"""mkdocs hook: the reference pages' tables, generated from the code at build time.

A page asks for one with a marker line, ``<!-- generated: NAME -->``; NAME is a key of
``GENERATORS``. The job spec and the manifest come from their pydantic models, the settings
from ``Settings``, the CLI from the typer app, the REST API from the gateway's OpenAPI document
(built in memory: no Redis, no server), which is also published as ``reference/openapi.json``.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File
from pydantic import BaseModel
from pydantic.fields import FieldInfo

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
CHECKOUT = str(Path(__file__).resolve().parents[2])
HOME = str(Path.home())
METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: object) -> str:
    """One markdown table cell: no line breaks, no column bars."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(annotation: object) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    text = str(annotation).replace("typing.", "").replace("NoneType", "None")
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_]\w*)", r"\1", text)


def _value(value: object) -> str:
    if isinstance(value, BaseModel):
        return "its defaults"
    text = str(value) if isinstance(value, Path) else json.dumps(value, default=str)
    return f"`{text.replace(CHECKOUT, '<checkout>').replace(HOME, '~')}`"


def _default(field: FieldInfo, required: bool = True) -> str:
    """``required`` as the JSON Schema says: a model may fill a field in that has no default."""
    if field.is_required():
        return "required" if required else "filled in (see meaning)"
    factory = field.default_factory
    if factory is None:
        return _value(field.default)
    if isinstance(factory, type) and issubclass(factory, BaseModel):
        return "its defaults"
    if factory in (list, dict, set, tuple):
        return _value(factory())
    return "computed at start"


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _model_tables(root: type[BaseModel]) -> str:
    """A table per model: the root's fields, then each model a field holds, first seen first."""
    order, todo = [], [root]
    while todo:
        model = todo.pop(0)
        if model in order:
            continue
        order.append(model)
        for field in model.model_fields.values():
            todo.extend(_models_in(field.annotation))
    parts = []
    for model in order:
        doc = " ".join((model.__doc__ or "").split())
        required = set(model.model_json_schema().get("required", []))
        rows = [f"| `{name}` | {_cell(_type(f.annotation))} | "
                f"{_cell(_default(f, name in required))} | "
                f"{_cell(f.description or '')} |" for name, f in model.model_fields.items()]
        parts.append(f"### `{model.__name__}`\n\n{doc}\n\n| field | type | default | meaning |\n"
                     "| --- | --- | --- | --- |\n" + "\n".join(rows))
    return "\n\n".join(parts)


def job_spec() -> str:
    from faasrl.jobs.spec import JobSpec
    return _model_tables(JobSpec)


def manifest() -> str:
    from faasrl.manifest import FunctionSpec
    return _model_tables(FunctionSpec)


def settings() -> str:
    from faasrl.config import Settings
    prefix = Settings.model_config.get("env_prefix", "")
    rows = [f"| `{prefix}{name.upper()}` | {_cell(_type(f.annotation))} | {_cell(_default(f))} "
            f"| {_cell(f.description or '')} |" for name, f in Settings.model_fields.items()]
    return ("| variable | type | default | meaning |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows))


def metrics_columns() -> str:
    from faasrl.round_row import COLUMNS, Group
    parts = []
    for group in Group:
        rows = [f"| `{c.name}` | `{c.namespaced}` | {c.unit} | {_cell(c.description)} |"
                for c in COLUMNS.values() if c.group is group]
        parts.append(f"## {group}\n\n| column | with `?columns=v2` | unit | meaning |\n"
                     "| --- | --- | --- | --- |\n" + "\n".join(rows))
    return "\n\n".join(parts)


@cache
def openapi_document() -> dict:
    from faasrl.config import Settings
    from faasrl.gateway.app import create_app
    # A client that never connects: the document is built from the routes alone.
    return create_app(Settings(token="docs"), "redis://127.0.0.1:1/0").openapi()


def rest_api() -> str:
    rows = []
    for path, ops in openapi_document()["paths"].items():
        for method in METHODS:
            if method in ops:
                op = ops[method]
                what = op.get("description", "").split("\n\n")[0].replace("``", "`")
                codes = ", ".join(sorted(op.get("responses", {})))
                what = what or op.get("summary", "")
                rows.append(f"| `{method.upper()}` | `{path}` | {_cell(what)} | {codes} |")
    return ("| method | path | what it does | answers |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows))


def _commands(command: Any, words: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """Every leaf command under a click group (typer's own click: duck-typed), in --help order."""
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _commands(sub, (*words, name))
    else:
        yield " ".join(words), command


def _option(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{param.human_readable_name}`"
    names = [*param.opts, *param.secondary_opts]
    return " / ".join(f"`{n}`" for n in names)


def cli() -> str:
    import typer

    from faasrl.cli import app
    parts = []
    for line, command in _commands(typer.main.get_command(app), ("faasrl",)):
        rows = []
        for p in command.params:
            if p.name == "help" or getattr(p, "hidden", False):
                continue
            default = "" if p.required or p.default in (None, False, ()) else _value(p.default)
            rows.append(f"| {_option(p)} | {_cell(p.type.name)} | "
                        f"{'required' if p.required else _cell(default)} | "
                        f"{_cell(getattr(p, 'help', None) or '')} |")
        head = "| argument or option | type | default | meaning |\n| --- | --- | --- | --- |\n"
        table = "\n\n" + head + "\n".join(rows) if rows else ""
        text = " ".join((command.help or "").split("\f")[0].split())
        parts.append(f"### `{line}`\n\n{text}{table}")
    return "\n\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "job-spec": job_spec, "manifest": manifest, "settings": settings,
    "metrics-columns": metrics_columns,
    "rest-api": rest_api, "cli": cli,
}


def _contracts_index(docs: Path) -> str:
    names = sorted(p.name for p in (docs / "contracts").glob("*.schema.json"))
    return ("# Function contracts\n\nThe JSON Schemas of what each built-in function receives "
            "and answers, per mode, written by `make docs-schemas` from "
            "`platform/faasrl/contracts.py`.\n\n" + "\n".join(f"- [{n}]({n})" for n in names))


def on_files(files, config):
    """Publish the OpenAPI document beside the REST API page, and the contracts' index."""
    files.append(File.generated(config, "reference/openapi.json",
                                content=json.dumps(openapi_document(), indent=1)))
    files.append(File.generated(config, "contracts/index.md",
                                content=_contracts_index(Path(config["docs_dir"]))))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)

