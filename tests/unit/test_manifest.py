"""Loading function manifests: defaults, the code folder, and errors that name file and field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faasrl.manifest import FunctionSpec, ManifestError, load_manifest
from faasrl.user_input import load_yaml


def test_folder_manifest_gets_its_folder_as_code_dir(tmp_path):
    (tmp_path / "manifest.yaml").write_text("name: f\nhandler: handler:main\n")
    spec = load_manifest(tmp_path)
    assert spec.code_dir == str(tmp_path)
    assert (spec.cpu, spec.memory_mb, spec.gpu, spec.max_concurrency) == (1.0, 512, 0, 1)


def test_json_manifest_and_explicit_code_dir(tmp_path):
    (tmp_path / "manifest.json").write_text(
        '{"name": "f", "handler": "pkg.mod:run", "code_dir": "/opt/code", "min_warm": 2}')
    spec = load_manifest(tmp_path / "manifest.json")
    assert spec.code_dir == "/opt/code" and spec.min_warm == 2


@pytest.mark.parametrize(("text", "needle"), [
    ("name: f\n", "handler"),
    ("name: f\nhandler: h:m\ncpu: 0\n", "cpu"),
    ("name: f\nhandler: h:m\nmemmory_mb: 5\n", "memmory_mb"),
    ("- a\n- b\n", "mapping"),
    ("name: [unclosed\n", "YAML"),
])
def test_errors_name_the_file_and_field(tmp_path, text, needle):
    (tmp_path / "manifest.yaml").write_text(text)
    with pytest.raises(ManifestError, match=needle) as err:
        load_manifest(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_missing_manifest(tmp_path):
    with pytest.raises(ManifestError, match="no manifest"):
        load_manifest(tmp_path)
    with pytest.raises(ManifestError, match="no such file"):
        load_manifest(tmp_path / "nope.yaml")


def test_env_names_are_checked():
    with pytest.raises(ValueError, match="1X"):
        FunctionSpec(name="f", handler="m:h", env={"1X": "v"})


FLOAT_FIELDS = [n for n, f in FunctionSpec.model_fields.items() if f.annotation is float]


def test_float_fields_are_found():
    assert set(FLOAT_FIELDS) == {"cpu", "gpu", "timeout_s", "keep_alive_s"}


@pytest.mark.parametrize("field", FLOAT_FIELDS)
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_floats_refuse_nan_and_infinity(tmp_path, field, value):
    (tmp_path / "manifest.yaml").write_text(f"name: f\nhandler: h:m\n{field}: {value}\n")
    with pytest.raises(ManifestError, match=f"{field}: Input should be a finite number"):
        load_manifest(tmp_path)


@pytest.mark.parametrize(("field", "value"), [
    ("memory_mb", True), ("memory_mb", "512"), ("min_warm", 1.0), ("gpu", False),
    ("cpu", "1"), ("cpu", True), ("timeout_s", "60")])
def test_numbers_are_strict(field, value):
    with pytest.raises(ValidationError) as err:
        FunctionSpec.model_validate({"name": "f", "handler": "m:h", field: value})
    assert [e["loc"] for e in err.value.errors()] == [(field,)]


def test_yaml_exponents_are_numbers(tmp_path):
    """PyYAML alone reads 5e-1 as a string, which a strict number field refuses."""
    (tmp_path / "manifest.yaml").write_text("name: f\nhandler: h:m\ncpu: 5e-1\ntimeout_s: 1E2\n")
    spec = load_manifest(tmp_path)
    assert (spec.cpu, spec.timeout_s) == (0.5, 100.0)
    assert load_yaml("a: 3e-4\nb: '3e-4'\nc: 12\nd: x1e3") == {"a": 3e-4, "b": "3e-4", "c": 12,
                                                               "d": "x1e3"}


def test_gpu_is_whole_devices_or_a_fraction_of_one():
    assert [FunctionSpec(name="f", handler="m:h", gpu=g).gpu for g in (0, 2, 2.0, 0.25)] == \
        [0, 2, 2, 0.25]
    with pytest.raises(ValidationError) as err:
        FunctionSpec(name="f", handler="m:h", gpu=1.5)
    assert [e["loc"] for e in err.value.errors()] == [("gpu",)]
    assert "whole number" in str(err.value)
