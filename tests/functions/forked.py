"""A handler that reports what its container process is (for the zygote's tests). Standard
library at the top (any interpreter); sqlite3 is imported here on purpose: no zygote preloads it."""

import contextlib
import getpass
import os
import random
import resource
import sys
import tempfile

PRELOADED = "sqlite3" in sys.modules
import sqlite3  # noqa: E402


def _dumpable() -> int:
    import ctypes

    pr_get_dumpable = 3
    return ctypes.CDLL(None).prctl(pr_get_dumpable, 0, 0, 0, 0)


def probe(args, context):
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    out = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
           "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
           "env": dict(os.environ), "cwd": os.getcwd(), "tmp": tempfile.gettempdir(),
           "data_limit": resource.getrlimit(resource.RLIMIT_DATA)[0], "fds": fds,
           "dumpable": _dumpable(), "random": random.random(), "sqlite3_preloaded": PRELOADED,
           "sqlite3": sqlite3.connect(":memory:").execute("select 6 * 7").fetchone()[0],
           # What libraries ask of their user (torch's compile cache folder calls getuser()).
           "user": getpass.getuser(), "home": os.path.expanduser("~")}
    if "torch" in sys.modules:
        import numpy as np
        import torch

        out.update(torch_threads=torch.get_num_threads(), numpy_random=float(np.random.random()),
                   torch_random=float(torch.rand(1)))
    return out
