"""How faasrl reads what users give it: manifests, job specs, request bodies.

One pydantic config for all of them — no unknown fields; strict numbers (a JSON bool is no count
of 1, a string is no number; floats still take ints); no NaN or infinity, which would pass every
bound check and then poison a schedule, a size or a duration — and one YAML reader.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, ConfigDict

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer as JSON Schema counts one: ``905.0`` is 905 (a client that writes every number as
# a float sends it so); ``905.5``, a string or a bool are still refused, naming the field.
Integer = Annotated[int, BeforeValidator(_integral)]


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where ``3e-4`` is a string (a float needs a dot); YAML 1.2 and
    JSON read it as a number, which is what a strict number field needs."""


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """Parse a YAML (or JSON) document, exponent numbers without a dot included."""
    return yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader: no arbitrary objects
