"""The HTTP server inside every function container.

``GET /healthz`` answers as soon as the server accepts; ``POST /init`` loads the handler once;
``POST /run`` calls it per invocation. When the container was given a secret (every backend gives
one, never to the handler), ``/init`` and ``/run`` require it as a bearer token: only the invoker
that started the container can run it, not another function on the same network.

Only the standard library is imported here, so a cold start costs Python's own start-up and the
handler's imports, nothing else. Module-level state of the handler survives between runs: that is
what a warm container buys.
"""

from __future__ import annotations

import base64
import gc
import hmac
import importlib
import io
import json
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Exit status of a runtime that stopped itself after a run outlived its deadline.
TIMEOUT_EXIT = 75
SECRET_ENV = "FAASRL_RUNTIME_SECRET"  # where a container's runtime finds its secret
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            409: "Conflict", 500: "Error"}
_SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: on-CPU ns, run-queue wait ns, timeslices


def _run_queue_s() -> float | None:
    """Seconds this thread has been runnable but waiting for a core (None off Linux)."""
    try:
        with open(_SCHEDSTAT) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class Usage:
    """What one run used, measured in the handler's own thread: the process's CPU time (all
    its threads: torch's pool too; a runtime runs one invocation at a time unless its
    ``concurrency`` says otherwise) and the time the handler's thread waited for a core.
    ``run - wait`` is how long the run would have taken with a core of its own: what the
    platform's modeled-parallel time is built on."""

    def __init__(self) -> None:
        self.cpu_s: float | None = None
        self.wait_s: float | None = None

    def call(self, handler: Any, args: Any, ctx: Context) -> Any:
        cpu, wait = time.process_time(), _run_queue_s()
        try:
            return handler(args, ctx)
        finally:
            self.cpu_s = time.process_time() - cpu
            now = _run_queue_s()
            self.wait_s = None if wait is None or now is None else now - wait

    def fields(self) -> dict[str, float | None]:
        return {"cpu_s": self.cpu_s, "wait_s": self.wait_s}


def _import_handler(module_name: str) -> Any:
    """Import a handler's module with the cyclic garbage collector paused, then freeze what it
    loaded. An ML handler's imports (torch) allocate millions of long-lived objects, and the
    full collections they trigger on the way cost about a second of CPU per cold start on our
    2-core machines (a third of it); frozen, they are skipped by every later collection too."""
    gc.disable()
    try:
        return importlib.import_module(module_name)
    finally:
        gc.enable()
        gc.freeze()


class Client:
    """The calling app, as Lambda's ClientContext ``client`` describes it."""

    FIELDS = ("installation_id", "app_title", "app_version_name", "app_version_code",
              "app_package_name")

    def __init__(self, data: dict[str, Any]):
        for name in self.FIELDS:
            setattr(self, name, data.get(name))


class ClientContext:
    """What the caller of Lambda's Invoke API passed as ClientContext, in Lambda's shape."""

    def __init__(self, data: dict[str, Any]):
        client = data.get("client")
        self.client = Client(client) if isinstance(client, dict) else None
        self.custom: dict[str, Any] | None = data.get("custom")
        self.env: dict[str, Any] | None = data.get("env")


class Context:
    """What a handler learns about its invocation (Lambda's names where Lambda has one)."""

    def __init__(self, invocation_id: str, function_name: str, memory_mb: int, deadline: float,
                 client_context: ClientContext | None = None):
        self.invocation_id = invocation_id
        self.aws_request_id = invocation_id
        self.function_name = function_name
        self.memory_limit_in_mb = memory_mb
        self.deadline = deadline
        self.client_context = client_context

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def get_remaining_time_in_millis(self) -> int:
        return int(self.remaining_s() * 1000)


def _error(kind: str, message: str, tb: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"type": kind, "message": message}
    if tb:
        err["traceback"] = tb
    return {"error": err}


def _anon_memory_mb() -> float | None:
    """This process's anonymous resident memory (what a tighter memory limit cannot reclaim)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) / 1024
    except (OSError, StopIteration, ValueError):
        return None


class Runtime:
    """The loaded handler and the thread(s) it runs on.

    A stem cell's runtime was started (and imported what functions import) before its function
    was known: ``/init`` then also names the folder to import the handler from (``cwd``), and
    sizes the thread pools that were sized at import to the ``OMP_NUM_THREADS`` it is given."""

    def __init__(self, stem_cell: bool = False) -> None:
        self.stem_cell = stem_cell
        self.handler: Any = None
        self.function = ""
        self.memory_mb = 0
        self.invocations = 0
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def health(self) -> dict[str, Any]:
        out = {
            "status": "ok",
            "initialized": self.handler is not None,
            "pid": os.getpid(),
            "invocations": self.invocations,
        }
        if self.stem_cell and self.handler is None:  # what a function's memory must exceed
            out["stem_cell"], out["memory_mb"] = True, _anon_memory_mb()
        return out

    def init(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handler = body.get("handler")
        env = body.get("env") or {}
        if not isinstance(handler, str) or ":" not in handler:
            return 400, _error("BadRequest", "handler: expected 'module:function'")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return 400, _error("BadRequest", "env: expected a mapping of strings")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return 400, _error("BadRequest", "cwd: expected a folder's path")
        with self._lock:
            if self.handler is not None:
                return 409, _error("Conflict", "this container is already initialized")
            os.environ.update(env)
            if body.get("code") is not None:
                try:
                    os.chdir(_unpack(body["code"]))
                except (TypeError, ValueError, OSError, zipfile.BadZipFile) as exc:
                    return 400, _error("BadRequest", f"code: not a base64 zip archive: {exc}")
            elif cwd is not None:
                try:
                    os.chdir(cwd)
                except OSError as exc:
                    return 400, _error("BadRequest", f"cwd: {exc}")
            if self.stem_cell and env.get("OMP_NUM_THREADS", "").isdigit():
                from faasrl.runtime.preload import size_threads

                size_threads(max(1, int(env["OMP_NUM_THREADS"])))
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module_name, func_name = handler.split(":", 1)
            try:
                func = getattr(_import_handler(module_name), func_name)
            except BaseException as exc:
                tb = traceback.format_exc()
                return 500, _error("InitError", f"{type(exc).__name__}: {exc}", tb)
            if not callable(func):
                return 500, _error("InitError", f"{handler} is not callable")
            self.function = str(body.get("function", module_name))
            self.memory_mb = int(body.get("memory_mb", 0))
            workers = max(1, int(body.get("concurrency", 1)))
            self._executor = ThreadPoolExecutor(workers, thread_name_prefix="handler")
            self.handler = func
        return 200, {"status": "initialized"}

    def run(self, body: dict[str, Any]) -> tuple[int, bytes, bool]:
        """Run one invocation; returns (status, JSON body, whether the runtime must now exit)."""
        if self._executor is None:
            return 409, _dumps(_error("Conflict", "POST /init first")), False
        try:
            deadline_s = float(body.get("deadline_s", 60.0))
        except (TypeError, ValueError):
            return 400, _dumps(_error("BadRequest", "deadline_s: expected a number")), False
        client_context = body.get("client_context")
        if client_context is not None and not isinstance(client_context, dict):
            return 400, _dumps(_error("BadRequest", "client_context: expected an object")), False
        start = time.monotonic()
        ctx = Context(str(body.get("invocation_id", "")), self.function, self.memory_mb,
                      start + deadline_s,
                      ClientContext(client_context) if client_context is not None else None)
        usage = Usage()
        future = self._executor.submit(usage.call, self.handler, body.get("args"), ctx)
        self.invocations += 1
        try:
            result = future.result(timeout=max(deadline_s, 0.0))
        except FutureTimeout:
            msg = f"the handler ran past its deadline of {deadline_s:g} s"
            out = _error("Timeout", msg) | {"duration_s": time.monotonic() - start}
            return 200, _dumps(out), True
        except BaseException as exc:
            tb = "".join(traceback.format_exception(exc)[1:])
            out = _error(type(exc).__name__, str(exc), tb)
            return 200, _dumps(out | {"duration_s": time.monotonic() - start,
                                      **usage.fields()}), False
        duration = time.monotonic() - start
        try:
            return 200, _dumps({"result": result, "duration_s": duration,
                                **usage.fields()}), False
        except (TypeError, ValueError) as exc:
            out = _error("ResultError", f"the result is not JSON-serializable: {exc}")
            return 200, _dumps(out | {"duration_s": duration, **usage.fields()}), False


def _unpack(code: str) -> str:
    """Unpack a base64 zip of the function's folder into a new temporary folder (the tmpfs in
    a container) and return it."""
    data = base64.b64decode(code, validate=True)
    folder = tempfile.mkdtemp(prefix="faasrl-code-")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(folder)  # drops absolute paths and '..' parts
    return folder


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: RuntimeServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: bytes) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.wfile.write(head.encode() + payload)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._send(200, _dumps(self.server.runtime.health()))
        else:
            self._send(404, _dumps(_error("NotFound", self.path)))

    def _authorized(self) -> bool:
        secret = self.server.secret
        if secret is None:
            return True
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(),
                                                                  secret.encode())

    def do_POST(self) -> None:
        if not self._authorized():
            self.close_connection = True
            self._send(401, _dumps(_error("Unauthorized", "this runtime takes requests from "
                                                          "the invoker that started it only")))
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length)) if length else {}
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
        except ValueError as exc:
            self._send(400, _dumps(_error("BadRequest", f"request body: {exc}")))
            return
        runtime = self.server.runtime
        if self.path == "/run":
            status, payload, must_exit = runtime.run(body)
            self._send(status, payload)
            if must_exit:
                # The handler thread cannot be stopped; the container goes with it.
                sys.stdout.flush()
                os._exit(TIMEOUT_EXIT)
        elif self.path == "/init":
            status, out = runtime.init(body)
            self._send(status, _dumps(out))
        else:
            self._send(404, _dumps(_error("NotFound", self.path)))


class RuntimeServer(ThreadingHTTPServer):
    """A threading HTTP server holding one Runtime; one thread per keep-alive connection."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], listen_fd: int | None = None,
                 secret: str | None = None, stem_cell: bool = False):
        self.runtime = Runtime(stem_cell)
        self.secret = secret
        if listen_fd is None:
            super().__init__(address, _Handler)
            return
        # Socket activation: the backend bound the port and handed us the listening socket, so
        # there is no race for a free port and connections queue up before we are ready.
        super().__init__(address, _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = socket.socket(fileno=listen_fd)
        self.server_address = self.socket.getsockname()
