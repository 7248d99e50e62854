"""Helpers the tests share: test-function manifests, waiting, process checks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEST_FUNCTIONS = Path(__file__).parent / "functions"
REPO = Path(__file__).resolve().parents[1]


def fn(name: str = "t", handler: str = "fns:echo", **kw: Any) -> dict[str, Any]:
    """A manifest for one of the test handlers."""
    return {"name": name, "handler": handler, "code_dir": str(TEST_FUNCTIONS), "cpu": 0.1,
            "memory_mb": 256, **kw}


def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition"
             ) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
