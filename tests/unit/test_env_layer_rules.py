"""Env layers without pip: what a requirements.txt may hold, the Python a layer is for, where
layers go, and how a function puts its layer on sys.path."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from helpers import env_archive

from faasrl import env_layers
from faasrl.backends.process import claim_folder, env_layers_folder, reachable_by
from faasrl.env_layers import LAYERS_ENV, activate, layer_path
from faasrl.env_layers.install import LayerError, ensure_layer, requirements_of
from faasrl.env_layers.target import PythonTarget, TargetError, interpreter_target

TARGET = PythonTarget("3.11.2", "cp", "cp311",
                      ("linux_x86_64", "manylinux_2_36_x86_64", "manylinux_2_35_x86_64"))


def test_package_requirements_are_taken_comments_dropped(tmp_path):
    archive, _ = env_archive(tmp_path, "# pinned\nnumpy>=1.26  # trailing\n\n"
                                       "gymnasium[classic-control]==1.0.0\n"
                                       "tomli; python_version < '3.11'\nrich ~= 13.7\n")
    assert requirements_of(archive) == ["numpy>=1.26", "gymnasium[classic-control]==1.0.0",
                                        "tomli; python_version < '3.11'", "rich ~= 13.7"]


@pytest.mark.parametrize(("line", "why"), [
    ("-e .", "pip options"),
    ("--index-url http://mirror.example/simple", "pip options"),
    ("-r ../../etc/other.txt", "pip options"),
    ("evil @ file:///etc/shadow", "not a package requirement"),
    ("https://example.com/pkg-1.0-py3-none-any.whl", "not a package requirement"),
    ("./vendored/pkg", "not a package requirement"),
    ("/srv/wheels/pkg.whl", "not a package requirement"),
])
def test_options_urls_and_paths_are_refused_before_pip(tmp_path, line, why):
    archive, _ = env_archive(tmp_path, f"numpy\n{line}\n")
    with pytest.raises(LayerError, match=f"requirements.txt line 2: .*{why}"):
        requirements_of(archive)


def test_a_layer_is_named_by_an_archive_digest_only(tmp_path):
    archive, _ = env_archive(tmp_path, "numpy\n")
    with pytest.raises(LayerError, match="not an archive's sha256"):
        asyncio.run(ensure_layer(tmp_path / "layers", archive, "../../etc"))
    assert not (tmp_path / "layers").exists()


def test_a_target_installs_natively_or_for_its_tags():
    assert TARGET.key == "cp3.11.2-cp311-manylinux_2_36_x86_64"
    native = PythonTarget(TARGET.version, TARGET.implementation, TARGET.abi, TARGET.platforms,
                          python="/usr/bin/python3.11")
    assert native.pip() == ["/usr/bin/python3.11", "-m", "pip", "install"]
    foreign = TARGET.pip()
    assert foreign[:4] == [sys.executable, "-m", "pip", "install"]
    assert " ".join(foreign[4:]) == (
        "--python-version 3.11.2 --implementation cp --abi cp311 --abi abi3 --abi none "
        "--platform linux_x86_64 --platform manylinux_2_36_x86_64 "
        "--platform manylinux_2_35_x86_64")


def test_this_interpreter_is_its_own_target_and_a_bad_probe_says_so():
    here = interpreter_target(sys.executable)
    assert here.python == sys.executable
    assert here.version == ".".join(map(str, sys.version_info[:3]))
    assert here.abi == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    with pytest.raises(TargetError, match="unexpected answer"):
        PythonTarget.from_probe("Traceback (most recent call last): ...")


@pytest.fixture
def clean_path():
    saved = list(sys.path)
    yield
    sys.path[:] = saved


def test_a_function_finds_and_activates_its_layer_once(tmp_path, monkeypatch, clean_path):
    sha = "a" * 64
    assert layer_path(sha) is None  # no FAASRL_ENV_LAYERS: a backend without layers
    monkeypatch.setenv(LAYERS_ENV, str(tmp_path))
    assert layer_path(sha) is None and activate(sha) is None  # no requirements.txt
    (tmp_path / sha).mkdir()
    threads = [threading.Thread(target=activate, args=(sha,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert activate(sha) == tmp_path / sha
    assert sys.path.count(str(tmp_path / sha)) == 1
    assert sys.path[-1] == str(tmp_path / sha)  # the runtime's own packages come first
    assert env_layers.__doc__ and "read-only" in env_layers.__doc__


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make folders of other users")
def test_layers_go_where_the_function_user_can_reach(tmp_path, monkeypatch):
    """A root gateway's functions run as uid 10001: a state dir it cannot pass (pytest's
    tmp_path is root's alone, as is /root) sends layers to a folder of the gateway's in the
    temporary folder, made only when a layer is first installed; one that someone else made
    there is refused."""
    preferred = tmp_path / "state" / "env-layers"
    assert not reachable_by(preferred, 10001, 10001)
    temp = Path(tempfile.mkdtemp(prefix="faasrl-test-tmp-"))
    try:
        temp.chmod(0o1777)
        monkeypatch.setattr(tempfile, "tempdir", str(temp))
        assert env_layers_folder(preferred, None) == preferred  # no user switch
        open_one = temp / "open" / "env-layers"  # folders still to make count as 0755
        assert env_layers_folder(open_one, (10001, 10001)) == open_one
        chosen = env_layers_folder(preferred, (10001, 10001))
        assert chosen == temp / f"faasrl-env-layers-{os.geteuid()}"
        assert not chosen.exists() and not preferred.exists()  # nothing made yet
        assert claim_folder(chosen, preferred) == chosen
        assert reachable_by(chosen, 10001, 10001)
        os.chown(chosen, 10001, 10001)  # as if another user had made it first
        with pytest.raises(LayerError, match="not the gateway's own folder"):
            claim_folder(chosen, preferred)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
