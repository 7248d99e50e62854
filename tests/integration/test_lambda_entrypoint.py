"""The Lambda image's entry point, run as Lambda runs it: ``python -m awslambdaric
faasrl.runtime.aws_lambda.handler`` against a Lambda Runtime API served here over real HTTP."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import REPO, TEST_FUNCTIONS

pytest.importorskip("awslambdaric")

PREFIX = "/2018-06-01/runtime"


class RuntimeApi(ThreadingHTTPServer):
    """Lambda's Runtime API: hands out queued events, collects responses and errors."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.events: queue.Queue[tuple[str, Any, dict[str, Any] | None]] = queue.Queue()
        self.results: queue.Queue[tuple[str, str, Any]] = queue.Queue()

    def invoke(self, event: Any, client_context: dict[str, Any] | None = None,
               timeout_s: float = 60) -> tuple[str, Any]:
        request_id = f"req-{time.time_ns()}"
        self.events.put((request_id, event, client_context))
        rid, kind, body = self.results.get(timeout=timeout_s)
        assert rid == request_id
        return kind, body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RuntimeApi

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path != f"{PREFIX}/invocation/next":
            return self._reply(404)
        request_id, event, client_context = self.server.events.get()
        headers = {"Content-Type": "application/json",
                   "Lambda-Runtime-Aws-Request-Id": request_id,
                   "Lambda-Runtime-Trace-Id": f"Root=1-00000000-{request_id[-24:]:0>24}",
                   "Lambda-Runtime-Deadline-Ms": str(int(time.time() * 1000) + 30_000),
                   "Lambda-Runtime-Invoked-Function-Arn":
                       "arn:aws:lambda:us-east-1:000000000000:function:faasrl-test"}
        if client_context is not None:
            headers["Lambda-Runtime-Client-Context"] = json.dumps(client_context)
        self._reply(200, json.dumps(event).encode(), headers)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        parts = self.path[len(PREFIX):].strip("/").split("/")
        if parts[0] == "invocation" and len(parts) == 3:
            self.server.results.put((parts[1], parts[2], json.loads(body) if body else None))
        elif parts[:2] == ["init", "error"]:
            self.server.results.put(("init", "init-error", json.loads(body)))
        self._reply(202, b"{}")


@pytest.fixture
def runtime_api() -> Iterator[RuntimeApi]:
    server = RuntimeApi()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def start(api: RuntimeApi, handler: str, redis_url: str = "redis://initial:1/0"
          ) -> subprocess.Popen[bytes]:
    env = {**os.environ, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{api.server_address[1]}",
           "AWS_LAMBDA_FUNCTION_NAME": "faasrl-test", "AWS_LAMBDA_FUNCTION_VERSION": "1",
           "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "FAASRL_HANDLER": handler,
           "FAASRL_FUNCTION": "test", "FAASRL_CODE_DIR": str(TEST_FUNCTIONS),
           "FAASRL_REDIS_URL": redis_url, "PYTHONPATH": str(REPO / "platform")}
    return subprocess.Popen([sys.executable, "-m", "awslambdaric",
                             "faasrl.runtime.aws_lambda.handler"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def lambda_process(runtime_api: RuntimeApi) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_the_handler_runs_with_the_local_runtimes_context(runtime_api, lambda_process):
    lambda_process.append(start(runtime_api, "fns:context_info"))
    kind, body = runtime_api.invoke({"x": 1})
    assert kind == "response"
    assert body["function"] == "test" and body["memory_mb"] == 1024
    assert body["invocation_id"].startswith("req-")
    assert 0 < body["remaining_ms"] <= 30_000


def test_the_client_contexts_faasrl_env_reaches_the_handler(runtime_api, lambda_process):
    lambda_process.append(start(runtime_api, "fns:env"))
    names = ["FAASRL_REDIS_URL", "PATH_OVERRIDE"]
    assert runtime_api.invoke(names) == ("response", {"FAASRL_REDIS_URL": "redis://initial:1/0",
                                                      "PATH_OVERRIDE": None})
    url = "rediss://:secret@redis.example:6380/0"
    kind, body = runtime_api.invoke(names, {"env": {"FAASRL_REDIS_URL": url,
                                                    "PATH_OVERRIDE": "x"}})
    assert (kind, body) == ("response", {"FAASRL_REDIS_URL": url, "PATH_OVERRIDE": None})


def test_handler_errors_and_import_errors_reach_lambda(runtime_api, lambda_process):
    lambda_process.append(start(runtime_api, "fns:boom"))
    kind, body = runtime_api.invoke("z")
    assert kind == "error"
    assert body["errorType"] == "ValueError" and body["errorMessage"] == "bad value: z"

    lambda_process.append(start(runtime_api, "no_such_module:main"))
    source, kind, body = runtime_api.results.get(timeout=60)
    assert (source, kind) == ("init", "init-error")
    assert "No module named 'no_such_module'" in body["errorMessage"]
