"""What a container sees of its GPU: the handler tests/gpu deploys (it imports torch, as a GPU
learner does, so the runtime applies a fraction's memory limit after importing it)."""

import os
import time

import torch

from faasrl.runtime.gpu import FRACTION_ENV, MPS_PERCENTAGE_ENV


def probe(args, context):
    """Hold the GPU ``hold_s`` seconds, then try to allocate ``allocate`` of its memory (a
    fraction of the device's total): "allocated" or "oom"."""
    started = time.time()
    out = {"uid": os.getuid(), "cuda": torch.cuda.is_available(),
           "container": os.environ.get("FAASRL_CONTAINER_ID"),
           "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "fraction": os.environ.get(FRACTION_ENV), "mps": os.environ.get(MPS_PERCENTAGE_ENV)}
    if out["cuda"]:
        props = torch.cuda.get_device_properties(0)
        out["device"] = str(getattr(props, "uuid", None) or props.name)  # same one: same id
        out["total"] = props.total_memory
        torch.zeros(1, device="cuda")  # a context of its own, held while it waits
    time.sleep(float(args.get("hold_s", 0)))
    if out["cuda"] and (share := args.get("allocate")) is not None:
        try:
            block = torch.empty(int(share * out["total"]), dtype=torch.uint8, device="cuda")
            out["allocated"] = "allocated"
            del block
        except torch.cuda.OutOfMemoryError:
            out["allocated"] = "oom"
        torch.cuda.empty_cache()
    out["started"], out["ended"] = started, time.time()
    return out
