"""Env layers with real pip from a local wheelhouse (no network): installed once per archive,
atomically, binary wheels only; read by real function processes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import (
    LAYER_MODULE,
    LAYER_REQUIREMENT,
    SDIST_ONLY,
    TEST_FUNCTIONS,
    env_archive,
    import_from_layer,
    runs_as,
)

from faasrl.backends.process import ProcessBackend
from faasrl.env_layers.install import MARKER, LayerError, ensure_layer
from faasrl.env_layers.target import PythonTarget
from faasrl.manifest import FunctionSpec

INSTALLED = "Successfully installed"  # pip's line of an install that ran


def install(root: Path, archive: bytes, sha: str, **kw) -> tuple[Path | None, list[str]]:
    lines: list[str] = []
    layer = asyncio.run(ensure_layer(root, archive, sha, progress=lines.append, **kw))
    return layer, lines


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock"))


def test_installs_once_readable_then_cached(pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", f"# the env's one dependency\n"
                                                 f"{LAYER_REQUIREMENT}\n")
    root = tmp_path / "layers"
    layer, lines = install(root, archive, sha)
    assert layer == root / sha
    assert any(LAYER_MODULE in line for line in lines) and INSTALLED in lines[-1], lines
    module = layer / f"{LAYER_MODULE}.py"
    assert module.read_text() == "ANSWER = 42\n"
    assert module.stat().st_mode & 0o777 == 0o644 and layer.stat().st_mode & 0o777 == 0o755
    assert json.loads((layer / MARKER).read_text())["requirements"] == [LAYER_REQUIREMENT]
    assert leftovers(root) == [sha]  # no temporary folder left

    again, lines = install(root, archive, sha)
    assert again == layer and lines == []  # the cache: pip did not run


def test_no_requirements_no_layer(pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", None)
    assert install(tmp_path / "layers", archive, sha) == (None, [])
    comments_only, sha = env_archive(tmp_path / "env2", "# nothing\n\n")
    assert install(tmp_path / "layers", comments_only, sha) == (None, [])
    assert not (tmp_path / "layers").exists()


def test_concurrent_installs_of_one_archive_run_pip_once(pip_index, tmp_path):
    """Three submits in this process and one in another install it once between them."""
    archive, sha = env_archive(tmp_path / "env", LAYER_REQUIREMENT)
    root = tmp_path / "layers"
    (tmp_path / "archive.zip").write_bytes(archive)
    other = subprocess.Popen(
        [sys.executable, "-c",
         "import asyncio, sys; from pathlib import Path\n"
         "from faasrl.env_layers.install import ensure_layer\n"
         "asyncio.run(ensure_layer(Path(sys.argv[1]), Path(sys.argv[2]).read_bytes(), "
         "sys.argv[3], progress=print))",
         str(root), str(tmp_path / "archive.zip"), sha], stdout=subprocess.PIPE, text=True)

    async def three() -> tuple[list[Path | None], list[str]]:
        lines: list[str] = []
        layers = await asyncio.gather(*(ensure_layer(root, archive, sha, progress=lines.append)
                                        for _ in range(3)))
        return list(layers), lines

    layers, lines = asyncio.run(three())
    out, _ = other.communicate(timeout=120)
    assert other.returncode == 0
    assert layers == [root / sha] * 3
    assert sum(INSTALLED in line for line in [*lines, *out.splitlines()]) == 1
    assert leftovers(root) == [sha]


@pytest.mark.parametrize(("glibc", "answer"), [(17, 42), (28, 43)])
def test_a_foreign_python_gets_the_wheels_of_its_platform(pip_index, tmp_path, glibc, answer):
    """Installing for another interpreter (an image's) picks by its tags, not the gateway's:
    a platform of glibc 2.17 cannot take 2.0's manylinux_2_28 wheel, one of 2.28 takes it."""
    archive, sha = env_archive(tmp_path / "env", "faasrl-layer-probe\n")
    platforms = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(glibc, 16, -1))
    target = PythonTarget("3.11.2", "cp", "cp311", (*platforms, "linux_x86_64"))
    layer, _ = install(tmp_path / "layers", archive, sha, target=target)
    assert layer is not None
    assert (layer / f"{LAYER_MODULE}.py").read_text() == f"ANSWER = {answer}\n"


def test_a_missing_package_fails_with_pips_reason(pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", "faasrl-no-such-package\n")
    root = tmp_path / "layers"
    with pytest.raises(LayerError) as err:
        install(root, archive, sha)
    assert "No matching distribution found for faasrl-no-such-package" in str(err.value)
    assert leftovers(root) == []  # neither a layer nor a half-made one


def test_source_only_packages_are_never_built(pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", f"{SDIST_ONLY}==1.0\n")
    root = tmp_path / "layers"
    with pytest.raises(LayerError) as err:
        install(root, archive, sha)
    assert f"No matching distribution found for {SDIST_ONLY}" in str(err.value)
    assert "binary wheels only" in str(err.value)
    assert not (pip_index.parent / "setup-ran").exists()  # its setup.py never ran
    assert leftovers(root) == []


def test_an_install_past_its_time_is_stopped(pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", LAYER_REQUIREMENT)
    root = tmp_path / "layers"
    with pytest.raises(LayerError, match=r"took longer than 0\.05 s"):
        install(root, archive, sha, timeout_s=0.05)
    assert leftovers(root) == []
    layer, lines = install(root, archive, sha)  # the lock was released
    assert layer == root / sha and INSTALLED in lines[-1]


@pytest.fixture
def layers_dir():
    """A layers folder every user may reach (pytest's tmp_path is its user's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="faasrl-test-layers-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def function_python() -> tuple[str, str]:
    """(interpreter, user) of function processes: where this is root, a Python the
    unprivileged uid 10001 can run (the project's may be under /root) and that uid."""
    if os.geteuid() != 0:
        return sys.executable, ""
    python = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if python is None or not runs_as(10001, python, "-c", "pass"):
        pytest.skip("no Python here that uid 10001 can run")
    if not runs_as(10001, python, "-c", f"import os; os.listdir({str(TEST_FUNCTIONS)!r})"):
        pytest.skip(f"uid 10001 cannot read {TEST_FUNCTIONS} (the checkout's folder)")
    return python, "10001:10001"


def test_a_function_process_imports_its_layer_read_only(pip_index, tmp_path, layers_dir):
    """A process-backend container, as the unprivileged function user (uid 10001, no passwd
    entry) where the gateway is root, imports the package from its layer after activate()
    and cannot write there. The layer is installed for the functions' interpreter."""
    archive, sha = env_archive(tmp_path / "env", LAYER_REQUIREMENT)
    python, user = function_python()
    spec = FunctionSpec(name="t", handler="fns:layer_import", code_dir=str(TEST_FUNCTIONS))

    async def scenario() -> dict:
        backend = ProcessBackend(tmp_path / "state", user=user, python=Path(python),
                                 env_layers_dir=layers_dir)
        try:
            assert bool(backend.credentials) == bool(user)
            store = await backend.layer_store()
            assert await store.ensure(archive, sha) == store.root / sha
            handle = await backend.start(spec, "c1")
            out = await import_from_layer(handle, sha, upload=False)
            return {**out, "root": str(store.root),
                    "uid_expected": (backend.credentials or (os.geteuid(),))[0]}
        finally:
            await backend.close()

    out = asyncio.run(scenario())
    assert out["answer"] == 42
    assert out["file"] == str(Path(out["root"]) / sha / f"{LAYER_MODULE}.py")
    assert out["uid"] == out["uid_expected"]
    if out["uid"] != 0:
        assert out["write"] == "PermissionError"
