"""Env layers: an env archive's ``requirements.txt``, installed once per archive into a folder
that function containers read, as a Lambda layer is.

The gateway installs (``install.ensure_layer``: binary wheels only, so no code of the user's
runs there) into ``<env_layers_dir>/<target key>/<archive sha256>/``, where the target key names
the Python the backend's functions run (``target.PythonTarget``). Backends give every function
container that folder read-only and its path in ``FAASRL_ENV_LAYERS``: the process and local
Ray backends the folder itself, the Docker backend a read-only mount at ``LAYERS_MOUNT``.
Functions on AWS Lambda and on a remote Ray cluster get none (their machines do not share the
gateway's disk).

This module is the function's side: stdlib only, imported inside containers before an env's
code. ``activate`` appends the layer to ``sys.path``: the runtime's own packages (torch,
numpy, gymnasium, faasrl) keep precedence, a layer adds what the runtime lacks.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

LAYERS_ENV = "FAASRL_ENV_LAYERS"  # the folder of this container's layers, one per archive
LAYERS_MOUNT = "/opt/faasrl/layers"  # where Docker containers see the layers dir (read-only)
REQUIREMENTS = "requirements.txt"  # an archive's top-level file that asks for a layer
NO_LAYERS_ON_LAMBDA = ("requirements.txt needs a platform backend (process, Docker or a local "
                       "Ray cluster): functions on AWS Lambda get no env layers; vendor the "
                       "packages into the archive or place the actors on the platform")

_lock = threading.Lock()


def layer_path(sha256: str) -> Path | None:
    """This container's layer of the archive ``sha256``; None where there is none (no
    requirements.txt, or a backend without layers)."""
    root = os.environ.get(LAYERS_ENV)
    if not root:
        return None
    path = Path(root) / sha256
    return path if path.is_dir() else None


def activate(sha256: str) -> Path | None:
    """Put the archive's layer on ``sys.path`` (at the end, once; safe from any thread) before
    the env's code is imported; returns it, None where there is no layer."""
    path = layer_path(sha256)
    if path is None:
        return None
    with _lock:
        if str(path) not in sys.path:
            sys.path.append(str(path))
    return path
