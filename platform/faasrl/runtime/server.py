"""The HTTP server inside every function container.

``GET /healthz`` answers as soon as the server accepts; ``POST /init`` loads the handler once;
``POST /run`` calls it per invocation. When the container was given a secret (every backend gives
one, never to the handler), ``/init`` and ``/run`` require it as a bearer token: only the invoker
that started the container can run it, not another function on the same network.

Only the standard library is imported here, so a cold start costs Python's own start-up and the
handler's imports, nothing else. Module-level state of the handler survives between runs: that is
what a warm container buys.

The HTTP/1.1 is ``runtime/http.py``'s; a run's handler is called on the thread of the connection
that carried it, and ``runtime/watchdog.py`` keeps the deadlines (``Timeout``, then the exit).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from faasrl.runtime.gpu import limit_memory as limit_gpu_memory
from faasrl.runtime.http import Connection, Request, dumps, error, listener, serve_forever
from faasrl.runtime.invalid import InvalidArgs
from faasrl.runtime.logs import Capture
from faasrl.runtime.watchdog import Run, Watchdog

# Exit status of a runtime that stopped itself after a run outlived its deadline.
TIMEOUT_EXIT = 75
SECRET_ENV = "FAASRL_RUNTIME_SECRET"  # where a container's runtime finds its secret
_SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: on-CPU ns, run-queue wait ns, timeslices
_threads = threading.local()


class _Schedstat:
    """This thread's schedstat, opened once per thread (an ``open`` costs 20 µs, a ``pread``
    1 µs). It lives in a thread-local, so it is closed when its thread ends."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # not Linux
            self._fd = None

    def run_queue_s(self) -> float | None:
        if self._fd is None:
            return None
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)


def _run_queue_s() -> float | None:
    """Seconds this thread has been runnable but waiting for a core (None off Linux)."""
    stat = getattr(_threads, "schedstat", None)
    if stat is None:
        stat = _threads.schedstat = _Schedstat()
    return stat.run_queue_s()


class Usage:
    """What one run used, measured in the handler's own thread: the process's CPU time (all
    its threads: torch's pool too; a runtime runs one invocation at a time unless its
    ``concurrency`` says otherwise) and the time the handler's thread waited for a core.
    ``run - wait`` is how long the run would have taken with a core of its own: what the
    platform's modeled-parallel time is built on."""

    __slots__ = ("cpu_s", "wait_s")

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


def _repr(obj: object, fields: tuple[str, ...], name: str | None = None) -> str:
    """``Name(field=value, ...)``: what a handler's print of a context object shows, as AWS's
    runtime shows its fields (not ``<... object at 0x...>``); ``name``: the class's by default."""
    shown = ", ".join(f"{n}={getattr(obj, n)!r}" for n in fields)
    return f"{name or type(obj).__name__}({shown})"


class CallingApp:
    """The calling app, as Lambda's ClientContext ``client`` describes it (not an HTTP client)."""

    FIELDS = ("installation_id", "app_title", "app_version_name", "app_version_code",
              "app_package_name")

    def __init__(self, data: dict[str, Any]):
        for name in self.FIELDS:
            setattr(self, name, data.get(name))

    def __repr__(self) -> str:
        return _repr(self, self.FIELDS, "Client")  # Lambda's name for it, as AWS's runtime prints


class ClientContext:
    """What the caller of Lambda's Invoke API passed as ClientContext, in Lambda's shape."""

    FIELDS = ("client", "custom", "env")

    def __init__(self, data: dict[str, Any]):
        client = data.get("client")
        self.client = CallingApp(client) if isinstance(client, dict) else None
        self.custom: dict[str, Any] | None = data.get("custom")
        self.env: dict[str, Any] | None = data.get("env")

    def __repr__(self) -> str:
        return _repr(self, self.FIELDS)


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

    def __repr__(self) -> str:
        return _repr(self, ("invocation_id", "function_name", "memory_limit_in_mb",
                            "client_context"))

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def get_remaining_time_in_millis(self) -> int:
        return int(self.remaining_s() * 1000)


def status_mb(field: str) -> float | None:
    """A size field of this process's ``/proc/self/status`` (``RssAnon``, ``VmData``) in MB;
    None where there is none (off Linux)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f
                        if line.startswith(f"{field}:")) / 1024
    except (OSError, StopIteration, ValueError):
        return None


class Runtime:
    """The loaded handler, run on the thread of the connection that asked (at most
    ``concurrency`` at once), with one watchdog keeping the runs' deadlines.

    A stem cell's runtime was started (and imported what functions import) before its function
    was known: ``/init`` then also names the folder to import the handler from (``cwd``), and
    sizes the thread pools that were sized at import to the ``OMP_NUM_THREADS`` it is given."""

    def __init__(self, stem_cell: bool = False, capture: Capture | None = None) -> None:
        self.stem_cell = stem_cell
        self.capture = capture  # what the handler writes, per invocation (None: not captured)
        self.handler: Any = None
        self.function = ""
        self.memory_mb = 0
        self.invocations = 0
        self._slots: threading.Lock | threading.Semaphore | None = None  # one per concurrent run
        self._threads = 0  # what the thread pools were last sized to by a run (0: not yet)
        self._blas: list[Any] | None = None  # OpenBLAS's setters, found on the first sizing
        self._watchdog: Watchdog | None = None
        self._lock = threading.Lock()

    def health(self) -> dict[str, Any]:
        out = {
            "status": "ok",
            "initialized": self.handler is not None,
            "pid": os.getpid(),
            "invocations": self.invocations,
        }
        if self.stem_cell and self.handler is None:  # what a function's memory must exceed
            out["stem_cell"], out["memory_mb"] = True, status_mb("RssAnon")
        return out

    def init(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handler = body.get("handler")
        env = body.get("env") or {}
        if not isinstance(handler, str) or ":" not in handler:
            return 400, error("BadRequest", "handler: expected 'module:function'")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return 400, error("BadRequest", "env: expected a mapping of strings")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return 400, error("BadRequest", "cwd: expected a folder's path")
        memory_mb, workers = body.get("memory_mb", 0), body.get("concurrency", 1)
        for name, value in (("memory_mb", memory_mb), ("concurrency", workers)):
            if not isinstance(value, int) or isinstance(value, bool):
                return 400, error("BadRequest", f"{name}: expected a whole number")
        with self._lock:
            if self.handler is not None:
                return 409, error("Conflict", "this container is already initialized")
            os.environ.update(env)
            if body.get("code") is not None:
                try:
                    os.chdir(_unpack(body["code"]))
                except (TypeError, ValueError, OSError) as exc:
                    return 400, error("BadRequest", f"code: not a base64 zip archive: {exc}")
            elif cwd is not None:
                try:
                    os.chdir(cwd)
                except OSError as exc:
                    return 400, error("BadRequest", f"cwd: {exc}")
            if self.stem_cell and env.get("OMP_NUM_THREADS", "").isdigit():
                from faasrl.runtime.preload import size_threads

                size_threads(max(1, int(env["OMP_NUM_THREADS"])))
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module_name, func_name = handler.split(":", 1)
            try:
                func = getattr(_import_handler(module_name), func_name)
                limit_gpu_memory()  # a fractional GPU's share, once torch is imported
            except BaseException as exc:
                tb = traceback.format_exc()
                return 500, error("InitError", f"{type(exc).__name__}: {exc}", tb)
            if not callable(func):
                return 500, error("InitError", f"{handler} is not callable")
            self.function = str(body.get("function", module_name))
            self.memory_mb = memory_mb
            self._slots = threading.Lock() if workers <= 1 else threading.Semaphore(workers)
            self._watchdog = Watchdog(_overrun)
            self.handler = func
            if self.capture is not None:
                self.capture.take_logging()  # its imports may have brought logging in
        return 200, self._with_container_logs({"status": "initialized"})

    def _size_threads(self, threads: int) -> None:
        """Size the numeric libraries' thread pools to a run's cores (lent ones, or its own
        again after a lent run); OpenBLAS's setters are looked up once."""
        from faasrl.runtime.preload import blas_setters, size_threads

        if self._blas is None:
            self._blas = blas_setters()
        size_threads(threads, self._blas)
        self._threads = threads

    def _with_container_logs(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with what was written outside any invocation since the last answer (the
        handler's imports, its background threads) as ``container_logs``."""
        if self.capture is not None and self.capture.container.parts:
            out["container_logs"] = self.capture.take_container()
        return out

    def run(self, body: dict[str, Any], reply: Callable[[int, bytes], None]) -> None:
        """Run one invocation on this thread and ``reply`` with its answer; past its deadline
        the watchdog answers ``Timeout`` instead and ends the process."""
        slots, watchdog = self._slots, self._watchdog
        if slots is None or watchdog is None:
            return reply(409, dumps(error("Conflict", "POST /init first")))
        try:
            deadline_s = float(body.get("deadline_s", 60.0))
        except (TypeError, ValueError):
            deadline_s = math.nan
        if not math.isfinite(deadline_s):
            return reply(400, dumps(error("BadRequest", "deadline_s: expected a number")))
        client_context = body.get("client_context")
        if client_context is not None and not isinstance(client_context, dict):
            return reply(400, dumps(error("BadRequest", "client_context: expected an object")))
        threads = body.get("threads", 0)
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            return reply(400, dumps(error("BadRequest", "threads: expected a whole number")))
        run = Run(time.monotonic(), deadline_s, reply)
        ctx = Context(str(body.get("invocation_id", "")), self.function, self.memory_mb,
                      run.deadline,
                      ClientContext(client_context) if client_context is not None else None)
        self.invocations += 1
        # Queued behind other runs (more connections than ``concurrency``) until the deadline.
        if not slots.acquire(timeout=min(max(deadline_s, 0.0), threading.TIMEOUT_MAX)):
            _overrun(run)
        capture = self.capture
        try:
            if threads and threads != self._threads:  # its lent cores, or back to its own
                self._size_threads(threads)
            if capture is not None:
                run.log, token = capture.begin()
            watchdog.begin(run)
            usage = Usage()
            try:
                out = {"result": usage.call(self.handler, body.get("args"), ctx)}
            except BaseException as exc:
                tb = "".join(traceback.format_exception(exc)[1:])
                out = error(type(exc).__name__, str(exc), tb)
                if isinstance(exc, InvalidArgs):
                    out["error"]["field"] = exc.field
            if capture is not None and run.log is not None:
                if logs := capture.end(run.log, token):
                    out["logs"] = logs
                self._with_container_logs(out)
            if not watchdog.end(run):
                time.sleep(60)  # the watchdog answers for this run and ends the process
        finally:
            slots.release()
        measured = {"duration_s": time.monotonic() - run.start, "cpu_s": usage.cpu_s,
                    "wait_s": usage.wait_s}
        try:
            payload = dumps(out | measured)
        except (TypeError, ValueError) as exc:
            payload = dumps(error("ResultError", f"the result is not JSON-serializable: {exc}")
                            | measured)
        reply(200, payload)


def _overrun(run: Run) -> NoReturn:
    """Answer ``Timeout`` for a run past its deadline and end the process: the handler's
    thread cannot be stopped, so the container goes with it."""
    msg = f"the handler ran past its deadline of {run.deadline_s:g} s"
    out = error("Timeout", msg) | {"duration_s": time.monotonic() - run.start}
    if run.log is not None and (logs := run.log.take()):
        out["logs"] = logs
    with contextlib.suppress(OSError):  # the invoker gave up first; it will see the exit
        run.reply(200, dumps(out))
    sys.stdout.flush()
    os._exit(TIMEOUT_EXIT)


def _unpack(code: str) -> str:
    """Unpack a base64 zip of the function's folder into a new temporary folder (the tmpfs in
    a container) and return it. Its modules are imported here: only uploaded code needs them,
    and at the top they cost every plain cold start 15 ms (the zygote and stem cells have them
    already, from torch)."""
    import base64
    import io
    import tempfile
    import zipfile

    data = base64.b64decode(code, validate=True)
    folder = tempfile.mkdtemp(prefix="faasrl-code-")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            zf.extractall(folder)  # drops absolute paths and '..' parts
    except zipfile.BadZipFile as exc:
        raise ValueError(exc) from exc
    return folder


def _body(request: Request) -> dict[str, Any]:
    body = json.loads(request.body) if request.body else {}
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    return body


class RuntimeServer:
    """The runtime's HTTP server holding one Runtime; one thread per keep-alive connection,
    which also runs that connection's invocations."""

    def __init__(self, address: tuple[str, int], listen_fd: int | None = None,
                 secret: str | None = None, stem_cell: bool = False,
                 capture: Capture | None = None):
        self.runtime = Runtime(stem_cell, capture)
        self.secret = secret
        self.socket = listener(address, listen_fd)
        self.server_address = self.socket.getsockname()

    def serve_forever(self) -> None:
        serve_forever(self.socket, self.handle, self.secret)

    def handle(self, conn: Connection, request: Request) -> None:
        """Answer one request (the HTTP layer has checked the secret of a POST)."""
        reply, path = conn.answer, request.path
        if request.method == "GET":
            if path == "/healthz":
                return reply(200, dumps(self.runtime.health()))
            return reply(404, dumps(error("NotFound", path)))
        if request.method != "POST":
            return reply(405, dumps(error("MethodNotAllowed", f"{request.method}: only GET "
                                                              "and POST are served")))
        try:
            body = _body(request)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            return reply(400, dumps(error("BadRequest", f"request body: {exc}")))
        if path == "/run":
            return self.runtime.run(body, reply)
        if path == "/init":
            status, out = self.runtime.init(body)
            return reply(status, dumps(out))
        return reply(404, dumps(error("NotFound", path)))
