"""``python -m faasrl.runtime``: start a function container's runtime server."""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys

from faasrl.runtime import logs
from faasrl.runtime.server import SECRET_ENV, RuntimeServer


def _limit_memory(memory_mb: int) -> None:
    """Cap private writable memory (the heap); RLIMIT_AS would also count shared libraries."""
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ValueError, OSError) as exc:
        print(f"faasrl runtime: memory limit not applied: {exc}", file=sys.stderr)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to kill us when the platform dies, so a crash leaves no orphan behind."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)


def _take_secret(secret_fd: int | None) -> str | None:
    """The secret the invoker will send, from an inherited pipe (the process backend: never in
    the environment, where other processes of the same user could read it) or from the
    environment (a container of its own); either way gone before the handler loads."""
    if secret_fd is not None:
        with os.fdopen(secret_fd, "rb") as f:
            return f.read().decode().strip() or None
    return os.environ.pop(SECRET_ENV, None) or None


def no_peeking() -> None:
    """Keep other processes of the same user out of this one (its memory, environment and
    file descriptors hold the secret and the job's Redis credentials)."""
    if sys.platform == "linux":
        import ctypes

        pr_set_dumpable = 4
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0)


def serve(*, listen_fd: int | None = None, secret_fd: int | None = None,
          memory_mb: int | None = None, parent_pid: int | None = None,
          host: str = "127.0.0.1", port: int = 8080, stem_cell: bool = False) -> None:
    """Run a container's runtime in this process until it is stopped (also the zygote's
    children, which arrive here already forked rather than freshly started).

    ``stem_cell``: a container started before its function was known (the Docker backend's
    stem cells) imports what functions import first, and answers ``/healthz`` only then."""
    if parent_pid:
        die_with_parent(parent_pid)
    no_peeking()
    if memory_mb:
        _limit_memory(memory_mb)
    secret = _take_secret(secret_fd)
    if stem_cell:
        from faasrl.runtime.preload import preload

        for name, why in preload().failed.items():
            print(f"faasrl runtime: {name} not preloaded ({why})", flush=True)
    server = RuntimeServer((host, port), listen_fd=listen_fd, secret=secret, stem_cell=stem_cell)
    host, port = server.server_address[:2]
    print(f"faasrl runtime listening on {host}:{port} (pid {os.getpid()})", flush=True)
    server.runtime.capture = logs.install()  # from here on, what is written is the function's
    server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m faasrl.runtime", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--listen-fd", type=int, help="serve on an inherited listening socket")
    parser.add_argument("--memory-mb", type=int, help="heap limit (setrlimit RLIMIT_DATA)")
    parser.add_argument("--parent-pid", type=int, help="exit when this process dies")
    parser.add_argument("--secret-fd", type=int,
                        help=f"read the bearer secret from this fd (else ${SECRET_ENV})")
    parser.add_argument("--stem-cell", action="store_true",
                        help="import what functions import before serving (a stem cell)")
    args = parser.parse_args(argv)
    serve(listen_fd=args.listen_fd, secret_fd=args.secret_fd, memory_mb=args.memory_mb,
          parent_pid=args.parent_pid, host=args.host, port=args.port, stem_cell=args.stem_cell)


if __name__ == "__main__":
    main()
