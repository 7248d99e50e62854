"""Loading function manifests: defaults, the code folder, and errors that name file and field."""

from __future__ import annotations

import pytest

from faasrl.manifest import FunctionSpec, ManifestError, load_manifest


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
