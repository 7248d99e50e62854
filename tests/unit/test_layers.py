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


def record_writes(path: Path) -> list[str]:
    """Assignments to a field of the job's record: ``rec.x = ...``, ``self.run.record.x += 1``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            for leaf in (t.elts if isinstance(t, ast.Tuple) else [t]):
                owner = leaf.value if isinstance(leaf, ast.Attribute) else None
                if (isinstance(owner, ast.Name) and owner.id == "rec") or (
                        isinstance(owner, ast.Attribute) and owner.attr == "record"):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(leaf)}")
    return found


def test_the_workflows_leave_the_record_to_the_job_run() -> None:
    """Only JobRun (adopt, bill, close_round) writes a job's record."""
    workflows = [p for p in (ROOT / "workflow").glob("*.py") if p.name != "job.py"]
    assert {p.name for p in workflows} >= {"sync.py", "stellaris.py", "offpolicy.py"}
    assert [w for p in workflows for w in record_writes(p)] == []
    assert record_writes(ROOT / "workflow" / "job.py")  # the check sees a write
