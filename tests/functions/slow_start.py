"""A handler whose module takes ``SLOW_START_S`` seconds to import: a container that stays
starting while a test acts on it."""

import os
import time

time.sleep(float(os.environ.get("SLOW_START_S", "0")))


def echo(args, context):
    return args
