"""The packages' layers: what each may import at run time, so that no two packages need each
other (a type named only for the checker, under ``TYPE_CHECKING``, does not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import faasrl

ROOT = Path(faasrl.__file__).parent

# package (or module) -> the faasrl packages it must not import at run time
BELOW: dict[str, set[str]] = {
    "jobs": {"workflow", "job_manager", "gateway"},  # the job's data: under the run and manager
    "workflow": {"job_manager", "gateway"},          # the job run and its workflows
    "resources": {"invoker", "backends", "gateway"},  # node capacity: under what reserves it
    "backends": {"invoker", "gateway"},              # how containers run: under the pool
}


def runtime_imports(path: Path) -> set[str]:
    """The faasrl packages ``path`` imports, leaving out ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                 for child in node.body for n in ast.walk(child)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {n.split(".")[1] for n in names if n.startswith("faasrl.")}
    return found


def sources(name: str) -> list[Path]:
    package = ROOT / name
    return sorted(package.rglob("*.py")) if package.is_dir() else [ROOT / f"{name}.py"]


@pytest.mark.parametrize("name", sorted(BELOW))
def test_a_package_imports_nothing_above_it(name: str) -> None:
    files = sources(name)
    assert files and all(f.exists() for f in files)
    wrong = {str(f.relative_to(ROOT)): sorted(runtime_imports(f) & BELOW[name]) for f in files}
    assert not {f: w for f, w in wrong.items() if w}


def test_the_metrics_columns_import_nothing_of_faasrl() -> None:
    """Algorithms, controllers, workflows and the gateway all name columns from it."""
    assert runtime_imports(ROOT / "round_row.py") == set()


def test_the_check_sees_an_upward_import() -> None:
    """The rule reads what it should: the manager imports the workflows, which import jobs."""
    assert "workflow" in runtime_imports(ROOT / "job_manager.py")
    assert "jobs" in runtime_imports(ROOT / "workflow" / "job.py")
