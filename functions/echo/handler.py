"""Echo: returns its arguments, optionally after sleeping ``sleep_s`` seconds.

The module-level counter shows what a warm container keeps between invocations.
"""

import os
import time

_served = 0


def main(args, context):
    global _served
    _served += 1
    if isinstance(args, dict) and args.get("sleep_s"):
        time.sleep(float(args["sleep_s"]))
    return {"echo": args, "pid": os.getpid(), "served": _served}
