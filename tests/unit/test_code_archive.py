"""Packing a function's folder and checking uploaded archives."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from faasrl.code_archive import ArchiveError, check, digest, pack


def test_pack_is_deterministic_and_skips_caches(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "handler.py").write_text("def main(a, c): return a\n")
    (tmp_path / "pkg" / "util.py").write_text("X = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"\0")
    first = pack(tmp_path)
    (tmp_path / "handler.py").touch()  # a new mtime does not change the archive
    assert digest(pack(tmp_path)) == digest(first)
    assert zipfile.ZipFile(io.BytesIO(first)).namelist() == ["handler.py", "pkg/util.py"]
    assert check(first) == 2


def _zip(name: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo(name), b"x")
    return buf.getvalue()


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil", "a/../../evil"])
def test_check_refuses_members_outside_the_folder(name: str):
    with pytest.raises(ArchiveError, match="outside"):
        check(_zip(name))


def test_check_refuses_what_is_not_a_zip():
    with pytest.raises(ArchiveError, match="not a zip"):
        check(b"hello")
