"""What a container with a fraction of a GPU is given, and what its runtime does with it on a
machine without CUDA (tests/gpu checks the limit itself on a GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from faasrl.backends.process import container_env
from faasrl.runtime.gpu import FRACTION_ENV, MPS_PERCENTAGE_ENV, mps_running, share_env


def test_a_fraction_gets_its_device_its_share_and_mps_where_it_runs(tmp_path: Path):
    env = container_env(1.0, "c1", (3,), tmp_path, gpu=0.25)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env[FRACTION_ENV] == "0.25"
    assert (MPS_PERCENTAGE_ENV in env) == mps_running()
    assert share_env(0.25, mps=True) == {FRACTION_ENV: "0.25", MPS_PERCENTAGE_ENV: "25"}
    assert share_env(0.001, mps=True)[MPS_PERCENTAGE_ENV] == "1"  # MPS takes 1 to 100


def test_whole_gpus_and_none_get_no_share(tmp_path: Path):
    for gpu, devices in ((1, (0,)), (2, (0, 1)), (0, ())):
        env = container_env(1.0, "c1", devices, tmp_path, gpu=gpu)
        assert FRACTION_ENV not in env and MPS_PERCENTAGE_ENV not in env
        assert env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, devices))


def test_mps_is_found_by_its_control_pipe(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert not mps_running()
    (tmp_path / "control").touch()
    assert mps_running()


def test_the_limit_never_imports_torch_for_a_function_without_it():
    code = ("import os, sys; os.environ['FAASRL_GPU_FRACTION'] = '0.25'; "
            "from faasrl.runtime.gpu import limit_memory; "
            "print(limit_memory(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["None", "False"]
