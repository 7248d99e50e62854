"""The docs site builds strictly (every link and anchor resolves), its generated reference holds
what the code defines, and the README stays a screen long, citing no issue and no figure that
the benchmarks page does not hold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from faasrl.config import Settings
from faasrl.jobs.spec import JobSpec
from faasrl.manifest import FunctionSpec

README = REPO / "README.md"
BENCHMARKS = REPO / "docs" / "benchmarks.md"
README_MAX_LINES = 250
# "issue 18", "issues 12 and 14", "#18": what a user cannot follow.
ISSUE_CITATION = re.compile(r"\bissues? #?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
# A figure: a number of ms or s, or a ratio (a multiplication sign), or a range of them
# (an en dash between).
FIGURE = re.compile(r"(\d[\d,]*(?:\.\d+)?)(?:\u2013(\d[\d,]*(?:\.\d+)?))?\s?(?:\u00d7|ms\b|s\b)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    path = os.pathsep.join([str(REPO / "platform"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_job_spec_reference_lists_every_field(site: Path):
    page = _page(site, "reference/job-spec")
    missing = [name for name in JobSpec.model_fields if f"<code>{name}</code>" not in page]
    assert missing == []
    assert "filled in" in page  # hyperparameters: no default, yet not required


def test_the_manifest_reference_lists_every_field(site: Path):
    page = _page(site, "reference/manifest")
    assert [n for n in FunctionSpec.model_fields if f"<code>{n}</code>" not in page] == []


def test_the_configuration_page_lists_every_setting(site: Path):
    page = _page(site, "reference/configuration")
    missing = [n for n in Settings.model_fields if f"<code>FAASRL_{n.upper()}</code>" not in page]
    assert missing == []


def test_the_rest_api_page_lists_every_route_and_publishes_the_document(site: Path):
    import json
    document = json.loads((site / "reference" / "openapi.json").read_text(encoding="utf-8"))
    page = _page(site, "reference/rest-api")
    missing = [p for p in document["paths"] if f"<code>{p}</code>" not in page]
    assert "/v1/jobs" in document["paths"]
    assert missing == []


def test_the_cli_page_lists_every_command(site: Path):
    page = _page(site, "reference/cli")
    for command in ("faasrl up", "faasrl jobs serve", "faasrl functions deploy",
                    "faasrl namespaces create", "faasrl deploy lambda"):
        assert f"<code>{command}</code>" in page, command


def test_the_readme_is_a_screen_long_and_cites_no_issue():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert ISSUE_CITATION.findall(text) == []
    assert "make run" in text and "make test" in text


def test_no_user_page_cites_an_issue():
    pages = [p for p in (REPO / "docs").rglob("*.md") if p.name != "architecture.md"]
    cited = {str(p.relative_to(REPO)): ISSUE_CITATION.findall(p.read_text(encoding="utf-8"))
             for p in pages}
    assert {page: hits for page, hits in cited.items() if hits} == {}


def test_every_figure_in_the_readme_is_on_the_benchmarks_page():
    readme = README.read_text(encoding="utf-8")
    benchmarks = BENCHMARKS.read_text(encoding="utf-8")
    figures = [n for pair in FIGURE.findall(readme) for n in pair if n]
    assert figures, "the README's figures were not found: the pattern is stale"
    missing = [n for n in figures if not re.search(rf"(?<![\d.,]){re.escape(n)}(?![\d,]|\.\d)",
                                                   benchmarks)]
    assert missing == []
