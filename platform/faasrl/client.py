"""A small client for the gateway's REST API, used by the CLI, the examples and the tests."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from faasrl import code_archive
from faasrl.manifest import FunctionSpec, load_manifest

# A submit or resume may wait for the env's probe and its packages' install, which the gateway
# bounds (env_probe_timeout_s, the install's own limit): connect promptly, read until it answers.
SUBMIT_TIMEOUT = httpx.Timeout(10.0, read=None)


class GatewayError(Exception):
    """A 4xx/5xx from the gateway, with its error type, message and offending fields."""

    def __init__(self, status: int, kind: str, message: str, fields: dict[str, str] | None = None):
        super().__init__(f"{status} {kind}: {message}")
        self.status, self.kind, self.message, self.fields = status, kind, message, fields or {}


def gateway_file(state_dir: Path) -> Path:
    """Where a running platform leaves its URL and token for the CLI on the same machine."""
    return Path(state_dir) / "gateway.json"


def _raise_for_error(resp: httpx.Response) -> None:
    """The gateway's uniform error body as a GatewayError (any 4xx/5xx)."""
    if resp.status_code < 400:
        return
    try:
        err = resp.json()["error"]
    except (ValueError, KeyError, TypeError):
        err = {"type": "HTTPError", "message": resp.text}
    raise GatewayError(resp.status_code, err.get("type", "HTTPError"), err.get("message", ""),
                       err.get("fields"))


def env_code_dir(spec: dict[str, Any], base: str | Path | None = None) -> Path | None:
    """The folder a job spec's ``env.code_dir`` names (relative to ``base``, the spec file's
    folder; default the working directory), or None when the spec has none. A path that is no
    folder is an ``ArchiveError`` naming the field."""
    env = spec.get("env")
    if not isinstance(env, dict) or env.get("code_dir") is None:
        return None
    folder = Path(base or ".") / str(env["code_dir"])
    if not folder.is_dir():
        raise code_archive.ArchiveError(f"env.code_dir: {folder} is not a folder")
    return folder


def server_events(lines: Iterator[str]) -> Iterator[tuple[str, Any, str | None]]:
    """(event, data as JSON, id) of each server-sent event in ``lines``."""
    event, data, eid = "message", [], None
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line.startswith("id:"):
            eid = line[3:].strip()
        elif not line and data:
            yield event, json.loads("\n".join(data)), eid
            event, data, eid = "message", [], None


class Client:
    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    @classmethod
    def discover(cls, url: str | None = None, token: str | None = None,
                 state_dir: Path | None = None) -> Client:
        """URL and token from the arguments, else ``FAASRL_URL``/``FAASRL_TOKEN``, else the
        gateway file a local ``faasrl up`` wrote."""
        url = url or os.environ.get("FAASRL_URL")
        token = token or os.environ.get("FAASRL_TOKEN")
        if url is None:
            state_dir = state_dir or Path(os.environ.get("FAASRL_STATE_DIR",
                                                         Path.home() / ".faasrl"))
            path = gateway_file(state_dir)
            if not path.is_file():
                raise GatewayError(0, "NotRunning", f"no gateway: set FAASRL_URL or run "
                                                    f"'faasrl up' (looked for {path})")
            info = json.loads(path.read_text())
            url, token = info["url"], token or info.get("token")
        return cls(url, token)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise GatewayError(0, "Unreachable", f"{self.url}: {exc}") from exc
        _raise_for_error(resp)
        return resp.json() if resp.content else None

    # --------------------------------------------------------------------- API
    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")

    def functions(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/functions")

    def function(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/functions/{name}")

    def upload_code(self, folder: str | Path) -> str:
        """Upload a function's folder as a zip (``POST /v1/code``); returns its sha256."""
        out = self._call("POST", "/v1/code", content=code_archive.pack(folder),
                         headers={"Content-Type": "application/zip"})
        return out["sha256"]

    def deploy(self, spec: FunctionSpec | dict[str, Any] | str | Path) -> dict[str, Any]:
        """Register or replace a function from a spec, a dict, or a folder with a manifest.

        From a folder, the code is uploaded too (unless the manifest names an image, which then
        holds it), so it reaches the function wherever the gateway runs its containers.
        """
        if isinstance(spec, str | Path):
            spec = load_manifest(spec)
            if spec.image is None and spec.code_dir:
                spec = spec.model_copy(update={"code_sha256": self.upload_code(spec.code_dir)})
        body = spec.model_dump(mode="json") if isinstance(spec, FunctionSpec) else spec
        return self._call("PUT", f"/v1/functions/{body['name']}", json=body)

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/v1/functions/{name}")

    def invoke(self, name: str, args: Any = None, timeout_s: float | None = None,
               affinity: str | None = None, qualifier: str | None = None) -> dict[str, Any]:
        """Invoke and wait; the record's ``status`` says how the handler did. ``qualifier``:
        a published version or an alias (default $LATEST); ``version`` says which answered."""
        body: dict[str, Any] = {"args": args}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        if affinity is not None:
            body["affinity"] = affinity
        return self._call("POST", f"/v1/functions/{name}/invoke", json=body, timeout=None,
                          params=None if qualifier is None else {"qualifier": qualifier})

    def publish_version(self, name: str, description: str = "") -> dict[str, Any]:
        """Publish the function as it is now (the newest version again if nothing changed)."""
        return self._call("POST", f"/v1/functions/{name}/versions",
                          json={"description": description})

    def versions(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/functions/{name}/versions")

    def delete_version(self, name: str, version: int) -> None:
        self._call("DELETE", f"/v1/functions/{name}/versions/{version}")

    def set_alias(self, name: str, alias: str, version: int,
                  canary: dict[int, float] | None = None, description: str = ""
                  ) -> dict[str, Any]:
        """Create or move an alias; ``canary``: {version: weight} for one more version."""
        body = {"version": version, "description": description,
                "routing": {"additional_version_weights": canary or {}}}
        return self._call("PUT", f"/v1/functions/{name}/aliases/{alias}", json=body)

    def alias(self, name: str, alias: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/functions/{name}/aliases/{alias}")

    def aliases(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/functions/{name}/aliases")

    def delete_alias(self, name: str, alias: str) -> None:
        self._call("DELETE", f"/v1/functions/{name}/aliases/{alias}")

    def invoke_async(self, name: str, args: Any = None, timeout_s: float | None = None,
                     qualifier: str | None = None) -> str:
        body: dict[str, Any] = {"args": args}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        params = {"mode": "async"} if qualifier is None else {"mode": "async",
                                                             "qualifier": qualifier}
        out = self._call("POST", f"/v1/functions/{name}/invoke", params=params, json=body)
        return out["id"]

    def invocation(self, invocation_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/invocations/{invocation_id}")

    def invocations(self, function: str | None = None, limit: int = 50,
                    status: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if function:
            params["function"] = function
        if status:
            params["status"] = status
        return self._call("GET", "/v1/invocations", params=params)

    def invocation_logs(self, invocation_id: str) -> str:
        """What the invocation printed, logged and warned (its last 64 KB)."""
        resp = self._http.get(f"/v1/invocations/{invocation_id}/logs")
        _raise_for_error(resp)
        return resp.text

    def function_logs(self, name: str, job: str | None = None, limit: int = 20
                      ) -> dict[str, Any]:
        """The function's recent invocations' output (``invocations``, newest first; only
        ``job``'s when given) and its containers' own (``containers``)."""
        params: dict[str, Any] = {"limit": limit, **({"job": job} if job else {})}
        return self._call("GET", f"/v1/functions/{name}/logs", params=params)

    def job_logs(self, job_id: str, limit: int = 20) -> dict[str, Any]:
        """The job's recent invocations' output, of every function, newest first."""
        return self._call("GET", f"/v1/jobs/{job_id}/logs", params={"limit": limit})

    def follow_logs(self, function: str | None = None, job: str | None = None,
                    limit: int = 20) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event, data) pairs as invocations finish: ``invocation`` (one's output) and
        ``container`` (its containers' own), the ``limit`` most recent first; of
        ``function`` (only ``job``'s when given), else of the ``job``. Until the stream
        ends or the caller stops iterating."""
        if function is None and job is None:
            raise ValueError("name a function, a job or both")
        params: dict[str, Any] = {"follow": 1, "limit": limit}
        if function is None:
            path = f"/v1/jobs/{job}/logs"
        else:
            path = f"/v1/functions/{function}/logs"
            params.update({"job": job} if job else {})
        for event, data, _ in self._events(path, params=params):
            yield event, data

    def _events(self, path: str, **kwargs: Any) -> Iterator[tuple[str, Any, str | None]]:
        """The server-sent events of ``GET path`` (``kwargs``: httpx's), until it ends."""
        with self._http.stream("GET", path, timeout=httpx.Timeout(10.0, read=None),
                               **kwargs) as resp:
            if resp.status_code >= 400:
                resp.read()
                _raise_for_error(resp)
            yield from server_events(resp.iter_lines())

    def function_stats(self, name: str, window: int = 200) -> dict[str, Any]:
        return self._call("GET", f"/v1/functions/{name}/stats", params={"window": window})

    def wait(self, invocation_id: str, timeout_s: float = 60.0, poll_s: float = 0.05,
             follow_retries: bool = True) -> dict[str, Any]:
        """Poll an async invocation until it has finished: with ``follow_retries``, its last
        attempt's record (a failed attempt that is retried names the next in ``retried_by``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            rec = self.invocation(invocation_id)
            if follow_retries and rec.get("retried_by"):
                invocation_id = rec["retried_by"]
                continue
            if rec["status"] in ("success", "error", "timeout"):
                return rec
            if time.monotonic() > deadline:
                raise TimeoutError(f"invocation {invocation_id} still {rec['status']}")
            time.sleep(poll_s)

    def dead_letters(self, name: str) -> list[dict[str, Any]]:
        """``name``'s asynchronous invocations that failed for good, newest first."""
        return self._call("GET", f"/v1/functions/{name}/dead-letters")

    def redrive(self, name: str, letter_id: str | None = None) -> list[dict[str, str]]:
        """Invoke a dead letter again (``letter_id``), or every one (None); each redriven
        letter's id and its new invocation's."""
        body = {"id": letter_id} if letter_id is not None else {"all": True}
        return self._call("POST", f"/v1/functions/{name}/dead-letters/redrive",
                          json=body)["redriven"]

    def delete_dead_letter(self, name: str, letter_id: str) -> None:
        self._call("DELETE", f"/v1/functions/{name}/dead-letters/{letter_id}")

    def prewarm(self, name: str, count: int) -> dict[str, int]:
        return self._call("POST", f"/v1/functions/{name}/prewarm", json={"count": count})

    def cluster(self) -> dict[str, Any]:
        return self._call("GET", "/v1/cluster")

    def metrics(self) -> str:
        return self._http.get("/metrics").text

    # -------------------------------------------------------- namespaces and keys
    def whoami(self) -> dict[str, Any]:
        """The caller's namespace and role, and whether it is the gateway's token (root)."""
        return self._call("GET", "/v1/whoami")

    def create_namespace(self, name: str, quota: dict[str, Any] | None = None
                         ) -> dict[str, Any]:
        return self._call("POST", "/v1/namespaces", json={"name": name, "quota": quota or {}})

    def namespaces(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/namespaces")

    def namespace(self, name: str) -> dict[str, Any]:
        """Its quota, and what it holds now and spent over the last 24 h (``usage``)."""
        return self._call("GET", f"/v1/namespaces/{name}")

    def set_quota(self, name: str, quota: dict[str, Any], replace: bool = False
                  ) -> dict[str, Any]:
        """Change the limits given (None: no limit); ``replace``: those left out go too."""
        return self._call("PUT" if replace else "PATCH", f"/v1/namespaces/{name}/quota",
                          json=quota)

    def delete_namespace(self, name: str) -> None:
        self._call("DELETE", f"/v1/namespaces/{name}")

    def create_key(self, namespace: str, role: str = "write", name: str = ""
                   ) -> dict[str, Any]:
        """A new key: ``key`` is in this answer only; ``lambda_api`` its SigV4 credentials."""
        return self._call("POST", f"/v1/namespaces/{namespace}/keys",
                          json={"role": role, "name": name})

    def keys(self, namespace: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/namespaces/{namespace}/keys")

    def revoke_key(self, namespace: str, key_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/namespaces/{namespace}/keys/{key_id}")

    # -------------------------------------------------------------------- jobs
    def submit(self, spec: dict[str, Any], base: str | Path | None = None) -> dict[str, Any]:
        """Start a job. An env given as a folder (``env.code_dir``, relative to ``base``) is
        packed and uploaded first, and the spec sent names the archive (``code_sha256``). No
        read timeout: the gateway bounds the submit (the env's probe, its packages' install)."""
        return self._call("POST", "/v1/jobs", json=self.upload_env(spec, base),
                          timeout=SUBMIT_TIMEOUT)

    def upload_env(self, spec: dict[str, Any], base: str | Path | None = None
                   ) -> dict[str, Any]:
        """``spec`` with its ``env.code_dir`` uploaded and replaced by its ``code_sha256``
        (the gateway cannot read the client's folders); unchanged without one."""
        folder = env_code_dir(spec, base)
        if folder is None:
            return spec
        env = {k: v for k, v in spec["env"].items() if k != "code_dir"}
        return {**spec, "env": {**env, "code_sha256": self.upload_code(folder)}}

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/jobs")

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def job_metrics(self, job_id: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/jobs/{job_id}/metrics")

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/jobs/{job_id}/cancel")

    def resume_job(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/jobs/{job_id}/resume", timeout=SUBMIT_TIMEOUT)

    def delete_job(self, job_id: str) -> None:
        self._call("DELETE", f"/v1/jobs/{job_id}")

    def model(self, job_id: str, version: int | None = None, format: str = "safetensors"
              ) -> bytes:
        """A model version's file (the latest when ``version`` is None): the safetensors file
        the job published, or with ``format="onnx"`` its acting network as ONNX."""
        params: dict[str, Any] = {"format": format}
        if version is not None:
            params["version"] = version
        resp = self._http.get(f"/v1/jobs/{job_id}/model", params=params)
        _raise_for_error(resp)
        return resp.content

    def serve_job(self, job_id: str, version: int | None = None, name: str | None = None
                  ) -> dict[str, Any]:
        """Deploy the job's policy function (the latest version unless ``version``; named
        ``<job id>-policy`` unless ``name``); invoke it with ``{"obs": ...}``."""
        body = {k: v for k, v in (("version", version), ("name", name)) if v is not None}
        return self._call("POST", f"/v1/jobs/{job_id}/serve", json=body,
                          timeout=SUBMIT_TIMEOUT)

    def videos(self, job_id: str) -> list[dict[str, Any]]:
        """The job's videos (index, version, frames, size, source), in order."""
        return self._call("GET", f"/v1/jobs/{job_id}/videos")

    def video(self, job_id: str, n: int) -> bytes:
        """Video ``n`` of the job, as mp4."""
        resp = self._http.get(f"/v1/jobs/{job_id}/videos/{n}")
        _raise_for_error(resp)
        return resp.content

    def play(self, job_id: str, version: int | None = None) -> dict[str, Any]:
        """Record one episode of a stored model version (the latest when None) as a new
        video; answers its description once it is written."""
        return self._call("POST", f"/v1/jobs/{job_id}/play", json={"version": version},
                          timeout=SUBMIT_TIMEOUT)

    def job_events(self, job_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event, data) pairs from the job's server-sent events until its ``end`` event;
        reconnects where it left off if the stream breaks."""
        last: str | None = None
        while True:
            headers = {"Last-Event-ID": last} if last is not None else {}
            try:
                for event, data, eid in self._events(f"/v1/jobs/{job_id}/events",
                                                     headers=headers):
                    yield event, data
                    if event == "end":
                        return
                    last = eid if eid is not None else last
            except httpx.TransportError:
                time.sleep(1.0)  # the gateway restarted or the link broke: pick up again
