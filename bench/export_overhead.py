"""What issue 21's exports cost where they run: the model card on every published version, and
the TensorBoard event file on every round of a job that asks for one.

Model files: per env family's default policy, the safetensors blob a learner publishes, with
the old metadata (``env_id``, ``policy``, ``version``) and with the card (rl/model_card.py):
its size, and the time to build the card and encode the blob (medians); the same blob as ONNX
(``?format=onnx``, rl/onnx_export.py): its size, the time the gateway takes to build it, and
one deterministic action per batch of 1 and 64 observations in onnxruntime against faasrl's
torch forward (``ActorCritic.act``, one thread each). TensorBoard: a real
CartPole job's metrics rows (from a short job on an embedded platform) written one by one with
``EventLog.add_row`` (flushed per row), against the same rows saved by ``JobStore.save_round``
on the same Redis: the per-row work a round already did before. Both in this process, timings
interleaved.

    python bench/export_overhead.py [--quick] [--out bench/results/export_overhead.json]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from jobrun import write_results
from redis.asyncio import Redis
from rich.console import Console
from rich.table import Table

from faasrl.config import Settings
from faasrl.data.codec import encode_tensors
from faasrl.embedded import EmbeddedPlatform
from faasrl.jobs.scalars import row_scalars
from faasrl.jobs.store import JobRecord, JobStore
from faasrl.jobs.tensorboard import EventLog
from faasrl.rl.model_card import model_card
from faasrl.rl.onnx_export import to_onnx
from faasrl.rl.policy import ActorCritic, policy_spec_for

ENVS = ("CartPole-v1", "Hopper-v5", "ALE/Pong-v5")
JOB = {"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 1},
       "evaluation_episodes": 0}


def median_s(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def onnx_figures(model: ActorCritic, blob: bytes, repeats: int) -> dict[str, Any]:
    """The blob as ONNX: size, build time, and a deterministic action per batch in onnxruntime
    and in torch, both on one thread."""
    onnx_model = to_onnx(blob)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(onnx_model, options, providers=["CPUExecutionProvider"])
    spec, out = model.spec, {"onnx_bytes": len(onnx_model),
                             "onnx_build_s": median_s(lambda: to_onnx(blob), repeats)}
    torch.set_num_threads(1)
    for batch in (1, 64):
        obs = np.zeros((batch, *spec.obs_shape), spec.obs_dtype)
        x = torch.from_numpy(obs)
        with torch.no_grad():
            out[f"torch_b{batch}_s"] = median_s(lambda x=x: model.act(x, True), repeats)
        out[f"onnxruntime_b{batch}_s"] = median_s(
            lambda o=obs: session.run(["action"], {"obs": o}), repeats)
    return out


def model_files(repeats: int) -> list[dict[str, Any]]:
    out = []
    for env_id in ENVS:
        spec = policy_spec_for(env_id)
        model = ActorCritic(spec)
        state = model.state_dict()
        card = model_card(model, env_id=env_id, algorithm="ppo")
        old = {"env_id": env_id, "policy": card["policy"], "version": "1"}
        new = {**card, "version": "1"}
        out.append({
            "env": env_id, "bytes_old": len(encode_tensors(state, metadata=old)),
            "bytes_card": len(encode_tensors(state, metadata=new)),
            "card_s": median_s(lambda m=model, e=env_id:
                               model_card(m, env_id=e, algorithm="ppo"), repeats),
            "encode_old_s": median_s(lambda s=state, m=old: encode_tensors(s, metadata=m),
                                     repeats),
            "encode_card_s": median_s(lambda s=state, m=new: encode_tensors(s, metadata=m),
                                      repeats),
            **onnx_figures(model, encode_tensors(state, metadata=new), repeats)})
    return out


async def row_writes(platform: EmbeddedPlatform, rows: list[dict[str, Any]], record: JobRecord,
                     folder: Path) -> dict[str, float]:
    """Per row, interleaved: JobStore.save_round (to a copy of the job) and EventLog.add_row."""
    redis = Redis.from_url(platform.redis_url)
    store, log = JobStore(redis), EventLog(folder)
    copy = record.model_copy(update={"id": "bench" + record.id[:7]})
    save, write = [], []
    try:
        for i, row in enumerate(rows):
            t0 = time.perf_counter()
            await store.save_round(copy, row, i)
            t1 = time.perf_counter()
            log.add_row(row, time.time())
            save.append(t1 - t0)
            write.append(time.perf_counter() - t1)
        await store.delete(copy.id)
    finally:
        log.close()
        await redis.aclose()
    return {"rows": len(rows), "scalars_per_row": len(row_scalars(rows[-1])),
            "save_round_s": statistics.median(save), "tensorboard_s": statistics.median(write)}


def tensorboard_rows(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="faasrl-bench-") as tmp:
        settings = Settings(state_dir=Path(tmp) / "state", port=0, resume_jobs=False)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            job = client.submit({**JOB, "stop": {"max_rounds": rounds}})
            while client.job(job["id"])["status"] in ("pending", "running"):
                time.sleep(0.5)
            rows = client.job_metrics(job["id"])
            record = JobRecord.model_validate(client.job(job["id"]))
            return asyncio.run(row_writes(platform, rows * 10, record, Path(tmp) / "tb"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few repeats: does it run?")
    parser.add_argument("--out", type=Path, default=Path("bench/results/export_overhead.json"))
    args = parser.parse_args()
    repeats, rounds = (5, 3) if args.quick else (50, 20)
    files, rows = model_files(repeats), tensorboard_rows(rounds)
    console = Console()
    table = Table("env", "file (old)", "file (card)", "size x", "card ms", "encode ms",
                  title="model card per published version")
    for f in files:
        table.add_row(f["env"], f"{f['bytes_old']:,}", f"{f['bytes_card']:,}",
                      f"{f['bytes_card'] / f['bytes_old']:.3f}", f"{f['card_s'] * 1e3:.2f}",
                      f"{f['encode_old_s'] * 1e3:.2f} → {f['encode_card_s'] * 1e3:.2f}")
    console.print(table)
    table = Table("env", "ONNX file", "x card file", "build ms", "act b1 ms torch → ORT",
                  "act b64 ms torch → ORT", title="the same version as ONNX")
    for f in files:
        table.add_row(f["env"], f"{f['onnx_bytes']:,}", f"{f['onnx_bytes'] / f['bytes_card']:.3f}",
                      f"{f['onnx_build_s'] * 1e3:.2f}",
                      *(f"{f[f'torch_b{b}_s'] * 1e3:.3f} → {f[f'onnxruntime_b{b}_s'] * 1e3:.3f} "
                        f"({f[f'onnxruntime_b{b}_s'] / f[f'torch_b{b}_s']:.2f}x)"
                        for b in (1, 64)))
    console.print(table)
    console.print(f"TensorBoard, per row ({rows['rows']} rows of a CartPole job): add_row "
                  f"{rows['tensorboard_s'] * 1e3:.2f} ms against save_round "
                  f"{rows['save_round_s'] * 1e3:.2f} ms "
                  f"({rows['tensorboard_s'] / rows['save_round_s']:.2f}x)")
    write_results(args.out, {"model_files": files, "tensorboard": rows})


if __name__ == "__main__":
    main()
