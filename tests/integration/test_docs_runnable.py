"""Every code block in the docs marked runnable (a ``<!-- runnable ... -->`` line right above
its fence) runs as written, with the ``faasrl`` CLI, against a live platform: a guide's
commands cannot drift from the CLI and the API they show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO

from faasrl.embedded import EmbeddedPlatform

DOCS = REPO / "docs"
MARK = "<!-- runnable"
FENCE = re.compile(r"^```(?:bash|sh)\s*$")
TOKEN = "docs-runnable-token"


def runnable_blocks() -> list[tuple[str, str]]:
    """(page:line, the block's text) of every marked block, page by page."""
    blocks = []
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.startswith(MARK):
                assert FENCE.match(lines[i + 1]), f"{page}:{i + 1}: a mark above no bash block"
                end = next(k for k in range(i + 2, len(lines)) if lines[k].startswith("```"))
                where = f"{page.relative_to(DOCS)}:{i + 2}"
                blocks.append((where, "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


BLOCKS = runnable_blocks()


def test_the_guides_mark_blocks_runnable():
    assert len(BLOCKS) >= 2, "a runnable mark was lost"


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_runnable_block_runs(where: str, block: str, tmp_path: Path,
                               make_platform: Callable[..., EmbeddedPlatform]):
    platform = make_platform(token=TOKEN)
    shim = tmp_path / "bin" / "faasrl"  # `faasrl` is this interpreter's, on this checkout
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m faasrl "$@"\n')
    shim.chmod(0o755)
    path = os.pathsep.join([str(REPO / "platform"), os.environ.get("PYTHONPATH", "")])
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FAASRL_")},
           "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": path,
           "FAASRL_URL": platform.url, "FAASRL_TOKEN": TOKEN, "HOME": str(tmp_path),
           "COLUMNS": "200"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{where}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
