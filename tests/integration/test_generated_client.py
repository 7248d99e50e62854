"""A client generated from the live ``/openapi.json`` by openapi-python-client, as a user of the
API would make one, drives the job API: submit, poll, list, read the metrics, cancel, resume,
and uploads code. Whatever the schema says wrong (two schemas of one title, a response type
the gateway does not send, a body type the generator cannot send) shows up here as an endpoint
or an answer the generated package lacks."""

from __future__ import annotations

import csv
import importlib
import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from helpers import wait_for

from faasrl.jobs.store import ACTIVE

pytest.importorskip("openapi_python_client")

PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions
PACKAGE = "faasrl_generated_client"
SHORT = {"name": "generated", "env_id": "CartPole-v1", "envs_per_actor": 2,
         "steps_per_actor": 32, "controller": {"name": "fixed", "actors": 2},
         "evaluation_episodes": 2, "stop": {"max_rounds": 2}}
LONG = {**SHORT, "name": "generated-long", "stop": {"max_rounds": 10_000}}


@pytest.fixture
def api(platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The package openapi-python-client generates from the platform's schema, imported from
    the test's directory (and forgotten after)."""
    schema = tmp_path / "openapi.json"
    schema.write_text(httpx.get(f"{platform.url}/openapi.json").text)
    config = tmp_path / "generator.yaml"
    config.write_text(f"package_name_override: {PACKAGE}\npost_hooks: []\n")
    out = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(schema),
         "--config", str(config), "--meta", "none", "--output-path", str(tmp_path / PACKAGE)],
        capture_output=True, text=True, timeout=120, check=False)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    # What the generator drops, it says so: a schema it removed, an endpoint it skipped.
    assert "Unable to process schema" not in report, report
    assert "will not be generated" not in report, report
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _endpoint(api: ModuleType, tag: str, name: str) -> ModuleType:
    """The generated module of operation ``name`` (its module is named by the operation id,
    which FastAPI makes of the route's function name, path and method)."""
    folder = Path(api.__file__).parent / "api" / tag
    [path] = folder.glob(f"{name}_*.py")
    return importlib.import_module(f"{PACKAGE}.api.{tag}.{path.stem}")


def test_a_generated_client_runs_jobs_and_uploads_code(api: ModuleType, platform) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    jobs = {name: _endpoint(api, "jobs", name) for name in (
        "submit", "get_job", "list_jobs", "metrics", "cancel", "resume")}
    with api.Client(base_url=platform.url, raise_on_unexpected_status=True) as client:
        # Submit: the spec's hyper-parameters, envs and steps left out take their defaults.
        spec = models.JobSpec.from_dict(SHORT)
        submitted = jobs["submit"].sync_detailed(client=client, body=spec)
        assert submitted.status_code == 201, submitted.content
        record = submitted.parsed
        assert isinstance(record, models.JobRecord) and record.spec.name == "generated"
        assert isinstance(record.spec.hyperparameters, models.PPOConfig)

        # Poll until it ends: every answer parses into a JobRecord.
        def ended() -> object:
            rec = jobs["get_job"].sync(client=client, job_id=record.id)
            assert isinstance(rec, models.JobRecord), rec
            return rec if rec.status not in ACTIVE else None
        done = wait_for(ended, timeout_s=120, what="the job to end", poll_s=0.5)
        assert done.status == "succeeded" and done.round_ == 2, done.to_dict()
        listed = jobs["list_jobs"].sync(client=client)
        assert [r.id for r in listed] == [record.id]
        assert all(isinstance(r, models.JobRecord) for r in listed)

        # A refused id is the gateway's error body, naming the field.
        refused = jobs["get_job"].sync(client=client, job_id="not an id")
        assert isinstance(refused, models.ErrorOut), refused
        assert "job_id" in refused.error.to_dict()["fields"], refused

        # Metrics: CSV and JSON both come back as the text the gateway sent.
        fmt = next(getattr(models, n) for n in dir(models) if n.startswith("Metrics")
                   and n.endswith("Format"))
        text = jobs["metrics"].sync(client=client, job_id=record.id, format_=fmt.CSV)
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [int(r["round"]) for r in rows] == [0, 1] and "mean_return" in rows[0]
        as_json = jobs["metrics"].sync(client=client, job_id=record.id, format_=fmt.JSON)
        assert [r["round"] for r in json.loads(as_json)] == [0, 1]

        # Cancel and resume answer the record; a finished job's cancel is a documented 409.
        refused = jobs["cancel"].sync(client=client, job_id=record.id)
        assert isinstance(refused, models.ErrorOut) and refused.error.type_ == "Conflict"
        long = jobs["submit"].sync(client=client, body=models.JobSpec.from_dict(LONG))
        cancelled = jobs["cancel"].sync(client=client, job_id=long.id)
        assert isinstance(cancelled, models.JobRecord) and cancelled.status == "cancelled"
        resumed = jobs["resume"].sync(client=client, job_id=long.id)
        assert isinstance(resumed, models.JobRecord) and resumed.id == long.id
        wait_for(lambda: jobs["get_job"].sync(client=client, job_id=long.id).status in ACTIVE,
                 what="the resumed job to run")
        cancelled = jobs["cancel"].sync(client=client, job_id=long.id)
        assert isinstance(cancelled, models.JobRecord) and cancelled.status == "cancelled"

        # Code: the generated call sends the archive's bytes as they are.
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("handler.py", "def handle(args, context):\n    return args\n")
        upload = _endpoint(api, "functions", "upload_code")
        types = importlib.import_module(f"{PACKAGE}.types")
        stored = upload.sync(client=client, body=types.File(payload=io.BytesIO(
            archive.getvalue()), file_name="code.zip"))
        assert isinstance(stored, models.CodeOut) and stored.files == 1, stored
