"""Handlers the tests deploy (code_dir = this folder)."""

import logging
import os
import subprocess
import sys
import threading
import time
import warnings

_calls = 0


def echo(args, context):
    global _calls
    _calls += 1
    return {"args": args, "pid": os.getpid(), "calls": _calls}


def sleep(args, context):
    time.sleep(args["s"])
    return {"slept": args["s"], "pid": os.getpid()}


def spin(args, context):
    """Busy for ``s`` seconds of wall time."""
    end = time.monotonic() + args["s"]
    while time.monotonic() < end:
        pass
    return {"pid": os.getpid()}


_meeting = threading.Barrier(2, timeout=10)


def meet(args, context):
    """Returns once two runs are in it at the same time (BrokenBarrierError after 10 s)."""
    _meeting.wait()
    return {"met": True}


def boom(args, context):
    raise ValueError(f"bad value: {args}")


def crash(args, context):
    os._exit(3)


def crash_first(args, context):
    """Kills the first container it runs in; succeeds in the next one."""
    if not os.path.exists(args["marker"]):
        open(args["marker"], "w").close()
        os._exit(3)
    return {"pid": os.getpid()}


def fail_times(args, context):
    """Raises on its first ``fail`` runs (counted in the file ``counter``), then succeeds."""
    with open(args["counter"], "a+") as f:
        f.write("x")
        f.seek(0)
        runs = len(f.read())
    if runs <= args["fail"]:
        raise RuntimeError(f"failing run {runs} of {args['fail']}")
    return {"runs": runs}


def slow_first(args, context):
    """Sleeps ``s`` seconds on its first run (marked by the file ``marker``), then returns."""
    if not os.path.exists(args["marker"]):
        open(args["marker"], "w").close()
        time.sleep(args["s"])
    return {"pid": os.getpid()}


def hog(args, context):
    return len(bytearray(args["mb"] * 1024 * 1024))


def env(args, context):
    return {k: os.environ.get(k) for k in args}


def context_info(args, context):
    return {"remaining_ms": context.get_remaining_time_in_millis(),
            "invocation_id": context.invocation_id, "function": context.function_name,
            "memory_mb": context.memory_limit_in_mb}


def client_context(args, context):
    cc = context.client_context
    if cc is None:
        return None
    client = None if cc.client is None else {k: getattr(cc.client, k) for k in cc.client.FIELDS}
    return {"client": client, "custom": cc.custom, "env": cc.env, "str": str(cc),
            "context": str(context)}


def unserializable(args, context):
    return {1, 2}


def spawn_child(args, context):
    """Starts a grandchild that would outlive a careless stop."""
    child = subprocess.Popen(["sleep", "300"])
    return {"pid": os.getpid(), "child": child.pid}


def half_bad_actor(args, context):
    """Slot 0 writes a malformed trajectory blob; other slots are the real actor."""
    import importlib.util

    import numpy as np

    from faasrl.data.connection import function_redis
    from faasrl.data.trajectories import TrajectoryStream

    if args.get("mode") == "rollout" and args["slot"] == 0:
        r = function_redis(args["job"])
        entry, nbytes = TrajectoryStream(r, args["job"]["id"]).append(
            args["round"], 0, args["version"], {"obs": np.zeros((3, 7), np.float32)})
        return {"steps": 3, "version": args["version"], "entry": entry, "episodes": [],
                "weights_fetched": False, "fetch_s": 0.0, "rollout_s": 0.0, "write_s": 0.0,
                "bytes": nbytes}
    global _actor
    if "_actor" not in globals():
        path = os.path.join(os.path.dirname(__file__), "..", "..", "functions", "actor",
                            "handler.py")
        spec = importlib.util.spec_from_file_location("real_actor", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["real_actor"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        _actor = module
    return _actor.main(args, context)


def _resp(host: str, port: int, *commands: list[str]) -> list[str]:
    """Send Redis commands over one connection (RESP, stdlib only); each reply's first line."""
    import socket

    replies = []
    with socket.create_connection((host, port), timeout=5) as s:
        f = s.makefile("rb")
        for cmd in commands:
            s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd))
            line = f.readline().decode().rstrip("\r\n")
            if line.startswith("$") and int(line[1:]) >= 0:
                line = f.read(int(line[1:]) + 2)[:-2].decode(errors="replace")
            replies.append(line)
    return replies


def probe(args, context):
    """What a function can reach: Redis keys as its job's user and without credentials, files,
    another container's runtime, its environment. Standard library only (any interpreter)."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(os.environ["FAASRL_REDIS_URL"])
    creds = args["job"]["redis"]
    own = f"faasrl:job:{args['job']['id']}:probe"
    other = f"faasrl:job:{args['other_job']}:secret"
    redis = dict(zip(["auth", "own_set", "own_get", "other_get", "other_set", "functions_get",
                      "functions_set", "scan", "flushall"], _resp(
        url.hostname, url.port,
        ["AUTH", creds["username"], creds["password"]], ["SET", own, "1"], ["GET", own],
        ["GET", other], ["SET", other, "x"], ["HGETALL", "faasrl:functions"],
        ["HSET", "faasrl:functions", "echo", "{}"], ["SCAN", "0"], ["FLUSHALL"]), strict=True))
    redis["no_credentials"] = _resp(url.hostname, url.port, ["GET", own])[0]
    keys = args.get("other_keys", [])  # any other key, read as the job's user
    other_keys = dict(zip(keys, _resp(url.hostname, url.port, ["AUTH", creds["username"],
                                                              creds["password"]],
                                      *(["GET", k] for k in keys))[1:], strict=True))
    files = {}
    for path in args.get("files", []):
        try:
            with open(path, "rb") as f:
                files[path] = f"read {len(f.read())} bytes"
        except OSError as exc:
            files[path] = type(exc).__name__
    host, port = args["runtime"].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("POST", "/run", body=b'{"args": {}}', headers={"Content-Type":
                                                                 "application/json"})
    runtime = conn.getresponse().status
    return {"redis": redis, "other_keys": other_keys, "files": files, "runtime_run": runtime,
            "uid": os.getuid(),
            "env": sorted(os.environ), "home": os.environ.get("HOME")}


TORCH_PRELOADED = "torch" in sys.modules  # when this module was imported: before its handler


def numeric_env(args, context):
    """Environment variables named in ``args``, and torch's threads (if it was preloaded)."""
    torch = sys.modules.get("torch")
    return {"env": {k: os.environ.get(k) for k in args}, "torch_preloaded": TORCH_PRELOADED,
            "torch_threads": torch.get_num_threads() if torch is not None else None}


def torch_threads(args, context):
    """torch's intra-op threads as this run finds them (torch imported here, at the call)."""
    import torch

    return torch.get_num_threads()


def layer_import(args, context):
    """Imports ``module`` from the env layer of the archive ``sha256`` and tries to write
    into that layer."""
    import importlib

    from faasrl.env_layers import activate

    layer = activate(args["sha256"])
    module = importlib.import_module(args["module"])
    try:
        (layer / "written.txt").write_text("x")
        written = "written"
    except OSError as exc:
        written = type(exc).__name__
    return {"layer": str(layer), "file": module.__file__, "answer": module.ANSWER,
            "uid": os.getuid(), "write": written}


def chatty(args, context):
    """Prints, logs and warns ``args["tag"]``, then ``args["kb"]`` KB of numbered lines; a
    thread it starts prints too; ``args["s"]``: seconds it sleeps between its lines (so that
    concurrent runs interleave)."""
    tag = args["tag"]
    print(f"print {tag}")
    time.sleep(args.get("s", 0))
    logging.getLogger("chatty").info("log %s", tag)
    warnings.warn(f"warn {tag}", UserWarning, stacklevel=1)
    for i in range(args.get("kb", 0)):
        print(f"{i:06d}" + "y" * 1017)
    worker = threading.Thread(target=print, args=(f"thread {tag}",))
    worker.start()
    worker.join()
    time.sleep(args.get("s", 0))
    print(f"end {tag}", file=sys.stderr)
    return tag


print("chatty imported")  # import-time output: the container's, not an invocation's


def invoke_other(args, context):
    """Invoke ``args.function`` through the gateway's Lambda API, as a function's own code
    would (boto3), and answer what it answered."""
    import json

    import boto3

    aws = boto3.client("lambda", endpoint_url=args["url"], region_name="us-east-1",
                       aws_access_key_id="faasrl", aws_secret_access_key=args["secret"])
    out = aws.invoke(FunctionName=args["function"], Payload=json.dumps(args["payload"]))
    return json.loads(out["Payload"].read())
