"""Function code uploaded over REST and unpacked in the container at init (process backend)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers import TEST_FUNCTIONS

from faasrl.client import Client, GatewayError
from faasrl.code_archive import pack


def test_uploaded_code_runs_without_a_folder_on_the_gateway(client: Client, tmp_path: Path):
    folder = tmp_path / "fn"
    folder.mkdir()
    (folder / "handler.py").write_text(
        "import os\ndef main(args, context):\n    return {'cwd': os.getcwd(), 'args': args}\n")
    sha = client.upload_code(folder)
    assert client.upload_code(folder) == sha  # the same folder, the same archive
    client.deploy({"name": "up", "handler": "handler:main", "code_sha256": sha, "cpu": 0.1,
                   "memory_mb": 128})
    out = client.invoke("up", 7)
    assert out["status"] == "success" and out["result"]["args"] == 7
    assert not out["result"]["cwd"].startswith(str(folder))  # it ran from the unpacked copy


def test_deploying_a_folder_uploads_it(client: Client, tmp_path: Path):
    folder = tmp_path / "fn"
    folder.mkdir()
    (folder / "manifest.yaml").write_text("name: fromdir\nhandler: fns:echo\ncpu: 0.1\n"
                                          "memory_mb: 128\n")
    (folder / "fns.py").write_text((TEST_FUNCTIONS / "fns.py").read_text())
    spec = client.deploy(folder)
    assert len(spec["code_sha256"]) == 64
    assert client.invoke("fromdir", {"a": 1})["result"]["args"] == {"a": 1}


def test_unknown_archive_is_a_422_naming_the_field(client: Client):
    with pytest.raises(GatewayError) as err:
        client.deploy({"name": "x", "handler": "m:f", "code_sha256": "0" * 64})
    assert err.value.status == 422 and "code_sha256" in err.value.fields


def test_a_bad_archive_is_refused(platform, tmp_path: Path):
    headers = {"Authorization": f"Bearer {platform.token}"} if platform.token else {}
    resp = httpx.post(f"{platform.url}/v1/code", content=b"not a zip", headers=headers)
    assert resp.status_code == 422 and "body" in resp.json()["error"]["fields"]
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "h.py").write_text("x = 1\n")
    ok = httpx.post(f"{platform.url}/v1/code", content=pack(tmp_path / "fn"), headers=headers)
    assert ok.status_code == 201 and ok.json()["files"] == 1
