"""Handlers the tests deploy (code_dir = this folder)."""

import os
import subprocess
import time

_calls = 0


def echo(args, context):
    global _calls
    _calls += 1
    return {"args": args, "pid": os.getpid(), "calls": _calls}


def sleep(args, context):
    time.sleep(args["s"])
    return {"slept": args["s"], "pid": os.getpid()}


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


def hog(args, context):
    return len(bytearray(args["mb"] * 1024 * 1024))


def env(args, context):
    return {k: os.environ.get(k) for k in args}


def context_info(args, context):
    return {"remaining_ms": context.get_remaining_time_in_millis(),
            "invocation_id": context.invocation_id, "function": context.function_name,
            "memory_mb": context.memory_limit_in_mb}


def unserializable(args, context):
    return {1, 2}


def spawn_child(args, context):
    """Starts a grandchild that would outlive a careless stop."""
    child = subprocess.Popen(["sleep", "300"])
    return {"pid": os.getpid(), "child": child.pid}
