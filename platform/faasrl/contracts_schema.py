"""The function contracts' JSON Schemas, as published in ``docs/contracts``.

``python -m faasrl.contracts_schema docs/contracts`` (``make docs-schemas``) writes, per
built-in function kind, the schema of its args (the union on ``mode``) and one per mode of the
result it answers with; ``tests/unit/test_contracts_schema.py`` fails when the committed files
differ from what the contracts generate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, TypeAdapter

from faasrl.contracts import (
    ActorArgs,
    BufferArgs,
    DescribeResult,
    EvaluateResult,
    ExploreResult,
    FlushResult,
    GradientResult,
    IngestResult,
    InitResult,
    LearnerArgs,
    ParameterArgs,
    RolloutResult,
    SampleResult,
    StepResult,
    TrainResult,
    UpdateResult,
)

SUFFIX = ".schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic generates
# Per function kind: its args' union, and the result model each mode answers with.
CONTRACTS: dict[str, tuple[Any, dict[str, type[BaseModel]]]] = {
    "actor": (ActorArgs, {"rollout": RolloutResult, "evaluate": EvaluateResult,
                           "explore": ExploreResult, "describe": DescribeResult}),
    "learner": (LearnerArgs, {"init": InitResult, "update": UpdateResult,
                               "gradient": GradientResult, "train": TrainResult}),
    "parameter": (ParameterArgs, {"step": StepResult, "flush": FlushResult}),
    "buffer": (BufferArgs, {"ingest": IngestResult, "sample": SampleResult}),
}


def modes(args: Any) -> list[str]:
    """The ``mode`` tags of an args union (``ActorArgs``, ...), in its order."""
    return [m.model_fields["mode"].default for m in get_args(get_args(args)[0])]


def schemas() -> dict[str, str]:
    """File name -> JSON text, for every function kind's args and each mode's result."""
    out: dict[str, Any] = {}
    for kind, (args, results) in CONTRACTS.items():
        out[f"{kind}.args{SUFFIX}"] = {"$schema": DIALECT, "title": f"{kind} args",
                                       **TypeAdapter(args).json_schema()}
        for mode, model in results.items():
            out[f"{kind}.{mode}.result{SUFFIX}"] = {"$schema": DIALECT,
                                                    **model.model_json_schema()}
    return {name: json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
            for name, schema in out.items()}


def write(folder: Path) -> list[Path]:
    """Write :func:`schemas` into ``folder``, removing schema files no contract makes now."""
    folder.mkdir(parents=True, exist_ok=True)
    made = schemas()
    for stale in folder.glob(f"*{SUFFIX}"):
        if stale.name not in made:
            stale.unlink()
    paths = []
    for name, text in made.items():
        (path := folder / name).write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m faasrl.contracts_schema FOLDER")
    for path in write(Path(sys.argv[1])):
        print(path)
