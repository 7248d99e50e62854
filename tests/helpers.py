"""Helpers the tests share: test-function manifests, waiting, ports, process checks, jobs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from faasrl import code_archive
from faasrl.backends.base import ContainerHandle
from faasrl.client import Client
from faasrl.data.keys import JOBS, job_record_key
from faasrl.invoker.runtime_client import RuntimeClient
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord

TEST_FUNCTIONS = Path(__file__).parent / "functions"
GPU_FUNCTIONS = Path(__file__).parent / "gpu" / "functions"
# Envs brought as code: a corridor that passes gymnasium's checker and ones that misbehave.
CORRIDOR_DIR = Path(__file__).parent / "envs" / "corridor"
CORRIDOR_MODULES = ("corridor", "misbehaving", "broken_import")
REPO = Path(__file__).resolve().parents[1]
# Lean Ray on a small machine: no usage report, no idle workers started ahead, quick to see a
# dead node.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_num_prestart_python_workers": "0",
           "RAY_prestart_worker_first_driver": "0", "RAY_health_check_period_ms": "500",
           "RAY_health_check_failure_threshold": "4"}
TEST_NETWORK = "faasrl-test"  # the Docker network the tests' platforms join (removed after)
LAYER_MODULE = "faasrl_layer_probe"  # the one module of the wheelhouse's package
LAYER_REQUIREMENT = "faasrl-layer-probe==1.0"
SDIST_ONLY = "faasrl-sdist-only"  # a package the wheelhouse holds only as source
NEWER_GLIBC_WHEEL = f"{LAYER_MODULE}-2.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def fn(name: str = "t", handler: str = "fns:echo", **kw: Any) -> dict[str, Any]:
    """A manifest for one of the test handlers."""
    return {"name": name, "handler": handler, "code_dir": str(TEST_FUNCTIONS), "cpu": 0.1,
            "memory_mb": 256, **kw}


def gpu_probe(name: str, gpu: float, **kw: Any) -> dict[str, Any]:
    """A manifest of tests/gpu's probe (what a container sees of its GPU); its memory is ample
    for a CUDA context."""
    return {"name": name, "handler": "gpu_probe:probe", "code_dir": str(GPU_FUNCTIONS),
            "cpu": 1, "memory_mb": 16384, "gpu": gpu, **kw}


def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition",
             poll_s: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(poll_s)


def start_runtime(*extra: str, preexec_fn: Callable[[], None] | None = None,
                  env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """``python -m faasrl.runtime`` on a free port, serving the test handlers; (process, URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "faasrl.runtime", "--port", "0", *extra],
                            cwd=TEST_FUNCTIONS, stdout=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    port = re.search(r":(\d+) ", line)
    assert port, line
    return proc, f"http://127.0.0.1:{port.group(1)}"


def build_wheelhouse(folder: Path) -> Path:
    """A local package index in ``folder``/house, made offline: wheels of a one-module package
    (``LAYER_MODULE``) built here from source, 1.0 (``ANSWER = 42``, any platform) and 2.0
    (``ANSWER = 43``, tagged for CPython 3.11 on glibc 2.28 or later, ``NEWER_GLIBC_WHEEL``),
    and ``SDIST_ONLY`` as an sdist alone, whose setup.py would leave ``folder``/setup-ran if it
    ever ran."""
    house = folder / "house"
    house.mkdir(parents=True)
    for version, answer in (("1.0", 42), ("2.0", 43)):
        src = folder / f"src-{version}"
        src.mkdir()
        (src / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools"]\n'
            'build-backend = "setuptools.build_meta"\n'
            f'[project]\nname = "faasrl-layer-probe"\nversion = "{version}"\n'
            f'[tool.setuptools]\npy-modules = ["{LAYER_MODULE}"]\n')
        (src / f"{LAYER_MODULE}.py").write_text(f"ANSWER = {answer}\n")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-index",
                        "--no-build-isolation", "--no-deps", "--wheel-dir", str(house),
                        str(src)], check=True, capture_output=True, cwd=folder)
    (house / f"{LAYER_MODULE}-2.0-py3-none-any.whl").rename(house / NEWER_GLIBC_WHEEL)
    name = SDIST_ONLY.replace("-", "_")
    setup = f"open({str(folder / 'setup-ran')!r}, 'w')\nfrom setuptools import setup\nsetup()\n"
    with tarfile.open(house / f"{name}-1.0.tar.gz", "w:gz") as tar:
        for member, text in ((f"{name}-1.0/setup.py", setup),
                             (f"{name}-1.0/PKG-INFO", f"Metadata-Version: 2.1\nName: "
                                                      f"{SDIST_ONLY}\nVersion: 1.0\n")):
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return house


def env_archive(folder: Path, requirements: str | None) -> tuple[bytes, str]:
    """An env's code as it is uploaded (``code_archive.pack``), with this ``requirements.txt``
    (None: none), and its sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corridor.py").write_text("import faasrl_layer_probe  # noqa: F401\n")
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements)
    archive = code_archive.pack(folder)
    return archive, code_archive.digest(archive)


async def import_from_layer(handle: ContainerHandle, sha256: str, *,
                            upload: bool) -> dict[str, Any]:
    """In a started container: ``fns:layer_import`` of the layer of ``sha256`` (``upload``:
    the test functions sent at /init, for a container that cannot see this checkout); its
    result."""
    client = RuntimeClient(handle.host, handle.port, handle.secret)
    try:
        for _ in range(600):  # its runtime answers once it has started
            with contextlib.suppress(ConnectionError):
                if (await client.request("GET", "/healthz", timeout=10))[0] == 200:
                    break
            await asyncio.sleep(0.1)
        init: dict[str, Any] = {"handler": "fns:layer_import", "function": "layered"}
        if upload:
            init["code"] = base64.b64encode(code_archive.pack(TEST_FUNCTIONS)).decode()
        status, out = await client.request("POST", "/init", init, timeout=30)
        assert status == 200, out
        status, out = await client.request(
            "POST", "/run", {"args": {"sha256": sha256, "module": LAYER_MODULE}}, timeout=30)
        assert status == 200 and "result" in out, out
        return out["result"]
    finally:
        client.close()


def runs_as(uid: int, python: str, *args: str) -> bool:
    """Whether ``python *args`` succeeds as ``uid`` (group ``uid``, no others)."""
    return subprocess.run([python, *args], user=uid, group=uid, extra_groups=[],
                          capture_output=True, cwd="/").returncode == 0


def with_python_path(folder: Path) -> str:
    """This process's PYTHONPATH with ``folder`` first: what a child given it imports from."""
    return os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])


def handler_module(function: str, name: str) -> ModuleType:
    """A fresh import, as module ``name``, of built-in function ``function``'s handler: what a
    new container runs (its warm state empty)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "functions" / function /
                                                  "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def half_imported_torch(folder: Path) -> str:
    """A PYTHONPATH (``folder`` first) whose ``torch`` (which the zygote preloads, and the
    gateway never imports) fails midway, having imported a module of its own: as torch._dynamo
    failed on ``getpass.getuser()`` for a uid without a passwd entry, after registering its
    artifacts."""
    package = folder / "torch"
    package.mkdir(parents=True)
    (package / "_registered.py").write_text("")
    (package / "__init__.py").write_text(
        "from torch import _registered  # noqa: F401\n"
        "raise KeyError('getpwuid(): uid not found: 10001')\n")
    return with_python_path(folder)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextlib.contextmanager
def ray_tmp_dir() -> Iterator[Path]:
    """A private folder for a test's Ray files (its clusters' sessions, logs and sockets; give
    it as RAY_TMPDIR), removed after: nothing lands in the shared /tmp/ray. Short, since Ray's
    socket paths under it must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="faasrl-t-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def parent(pid: int) -> int | None:
    """``pid``'s parent; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def cmdline(pid: int) -> bytes:
    """``pid``'s command line (as Ray retitles its workers: ``ray::<actor class>``); empty once
    it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def children(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and parent(int(p.name)) == pid]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children(found[-1])
    return found


LOOPBACK_HEX = {"0100007F", "00000000000000000000000001000000",  # 127.0.0.1, ::1
                "0000000000000000FFFF00000100007F"}  # ::ffff:127.0.0.1


def listening_sockets(pids: list[int]) -> list[tuple[int, str, int]]:
    """The TCP sockets the processes ``pids`` listen on: (pid, address as /proc/net/tcp{,6}
    writes it, in hex, port)."""
    listening: dict[str, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                address, port = fields[1].split(":")
                listening[fields[9]] = (address, int(port, 16))
    found = []
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # gone meanwhile
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and (inode := target[8:-1]) in listening:
                found.append((pid, *listening[inode]))
    return found


def error_fields(exc: Any) -> set[str]:
    """The fields a pydantic ``ValidationError`` names, dotted as the API's 422 names them."""
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def on_gateway(platform: Any, work: Callable[[Any], Any], timeout_s: float = 10.0) -> Any:
    """Run ``work(services)`` (a coroutine function) on an embedded platform's own event loop,
    where its Redis clients live: how tests make namespaces, keys and records without routes."""
    services = platform._app.state.services
    loop = platform._server.servers[0].get_loop()
    return asyncio.run_coroutine_threadsafe(work(services), loop).result(timeout_s)


def namespace_key(platform: Any, namespace: str, role: str = "write") -> tuple[str, str]:
    """(the id, the key) of a new API key of ``namespace``, made with the namespace if new,
    through the gateway's KeyStore."""
    from faasrl.namespaces import Namespace

    async def make(services: Any) -> tuple[str, str]:
        if services.keys.namespace(namespace) is None:
            await services.keys.save_namespace(Namespace(name=namespace))
        record, key = await services.keys.create_key(namespace, role)
        return record.id, key

    return on_gateway(platform, make)


def revoke_key(platform: Any, key_id: str) -> None:
    async def revoke(services: Any) -> None:
        await services.keys.revoke(key_id)

    on_gateway(platform, revoke)

def docker_platform(make_platform: Callable[..., Any], runtime_image: str) -> tuple[Any, str]:
    """A platform on the Docker backend with the built-in functions, on a node of its own (its
    containers carry the node's label), and that node's name."""
    node = f"test-{uuid.uuid4().hex[:8]}"
    return make_platform(backend="docker", redis_url=None, node_name=node,
                         docker_network=TEST_NETWORK, docker_image=runtime_image,
                         register_builtins=True), node


def finished(client: Any, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The job's record once it has ended: not pending, running, or interrupted (which a
    restarted gateway resumes)."""
    return wait_for(lambda: (j := client.job(job_id))["status"] not in
                    ("pending", "running", "paused", "interrupted") and j,
                    timeout_s=timeout_s, what=f"job {job_id} to finish", poll_s=0.1)


def set_quota(platform: Any, namespace: str, **limits: Any) -> None:
    """Store a namespace with this quota and apply it, on an embedded gateway's own loop (as
    the namespaces' admin route does)."""
    from faasrl.gateway.services.quotas import apply_quota
    from faasrl.namespaces import Namespace, Quota

    svc = platform._app.state.services

    async def save() -> None:
        await svc.keys.save_namespace(Namespace(name=namespace, quota=Quota(**limits)))
        apply_quota(svc, namespace)

    asyncio.run_coroutine_threadsafe(save(), svc.invoker._ticker.get_loop()).result(10)


def succeeded(client: Any, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The job's record once it has ended, which must be a success."""
    job = finished(client, job_id, timeout_s)
    assert job["status"] == "succeeded", job
    return job


# One small job per algorithm family on a classic-control env: seconds per round on one core.
TINY_JOBS: dict[str, dict[str, Any]] = {
    "ppo": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32},
    "dqn": {"algorithm": "dqn", "env_id": "CartPole-v1", "steps_per_actor": 64,
            "hyperparameters": {"learning_starts": 64, "batch_size": 32}},
    "sac": {"algorithm": "sac", "env_id": "Pendulum-v1", "steps_per_actor": 64,
            "hyperparameters": {"learning_starts": 64, "batch_size": 32}},
    "impact": {"algorithm": "impact", "env_id": "CartPole-v1", "envs_per_actor": 2,
               "steps_per_actor": 32, "asynchronous": {"max_learners": 1}},
}


def tiny_job(algorithm: str, rounds: int = 2, **fields: Any) -> dict[str, Any]:
    """``TINY_JOBS[algorithm]`` with one actor, no evaluation, ``rounds`` rounds and
    ``fields``."""
    return {**TINY_JOBS[algorithm], "controller": {"name": "fixed", "actors": 1},
            "evaluation_episodes": 0, "stop": {"max_rounds": rounds}, **fields}


def assert_rows_whole(rows: list[dict[str, Any]], rounds: int,
                      env_steps: int | None = None) -> None:
    """A job's metrics rows after any fault: one per round, in order, none missing or twice;
    ``env_steps`` per round when given (synchronous: actors * envs * steps); running sums
    that agree with the rows."""
    assert [r["round"] for r in rows] == list(range(rounds)), [r["round"] for r in rows]
    total_steps = total_cost = 0.0
    for row in rows:
        if env_steps is not None:
            assert row["env_steps"] == env_steps, row
        total_steps += row["env_steps"]
        total_cost += row["cost_round"]
        assert row["total_env_steps"] == total_steps, row
        assert abs(row["cost_total"] - total_cost) <= 1e-9 + 1e-6 * total_cost, row


def stall(rows: list[dict[str, Any]]) -> float:
    """How much longer than the median round the slowest round took (what a fault cost);
    round 0 is left out: its learner warms up."""
    times = sorted(r["round_s"] for r in rows[1:])
    return times[-1] - times[len(times) // 2]


def at_round(client: Client, job_id: str, k: int) -> None:
    wait_for(lambda: client.job(job_id)["round"] >= k, timeout_s=120, what=f"round {k}",
             poll_s=0.05)


def every_invocation_recorded(client: Client, function: str, at_least: int) -> None:
    """Records of ``function`` exist for at least the invocations the rows account for."""
    recs = wait_for(lambda: len(r := client.invocations(function, limit=1000)) >= at_least
                    and r, what=f"{at_least} records of {function}")
    assert all(r["status"] in ("success", "error", "timeout") for r in recs)


# ------------------------------------------------------------- the gateway as a process
class Platforms:
    """The ``faasrl up`` processes a test starts, each stopped when the test ends, passed or
    failed (the ``platforms`` fixture): a failed test must not leave a platform running."""

    STOP_GRACE_S = 60.0

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[Any]] = []

    def add(self, proc: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        """Stop ``proc`` (a ``faasrl up``) with the others."""
        self._procs.append(proc)
        return proc

    def gateway(self, state: Path, port: int, token: str, *options: str,
                **env: str) -> subprocess.Popen[bytes]:
        """:func:`gateway`, stopped with the others."""
        return self.add(gateway(state, port, token, *options, **env))

    def stop_all(self) -> None:
        """SIGTERM, as users stop a platform; what still runs ``STOP_GRACE_S`` later is killed
        with its whole session (its children die with it anyway: parent-death signals)."""
        running = [p for p in self._procs if p.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.STOP_GRACE_S
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(ProcessLookupError):  # one not leading its session
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> Platforms:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def gateway(state: Path, port: int, token: str, *options: str,
            **env: str) -> subprocess.Popen[bytes]:
    """``faasrl up`` with ``options`` in its own process and session (its log in the state
    dir's parent). A test stops it whatever happens: ``platforms.gateway`` does."""
    log = open(state.parent / f"gateway-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "faasrl", "up", "--port", str(port), "--state-dir", str(state),
         *options],
        env={**os.environ, "FAASRL_TOKEN": token, **env}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def gateway_up(url: str, token: str, proc: subprocess.Popen[bytes],
               timeout_s: float = 60) -> Client:
    """A client of the gateway process ``proc`` once it answers at ``url``."""
    def healthy() -> bool:
        assert proc.poll() is None, f"the gateway exited with {proc.returncode}"
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout_s=timeout_s, what="the gateway", poll_s=0.1)
    return Client(url, token)


async def _pipelined(host: str, port: int, request: bytes, count: int, depth: int
                     ) -> list[tuple[int, bytes]]:
    """``count`` copies of ``request`` on one connection, ``depth`` sent before their answers
    are read; each answer's (status, body)."""
    reader, writer = await asyncio.open_connection(host, port)
    out: list[tuple[int, bytes]] = []
    try:
        while len(out) < count:
            batch = min(depth, count - len(out))
            writer.write(request * batch)
            await writer.drain()
            for _ in range(batch):
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                out.append((status, await reader.readexactly(length)))
    finally:
        writer.close()
    return out


def pipelined_invocations(url: str, function: str, args: Any, count: int,
                          connections: int = 8, depth: int = 32) -> list[tuple[int, bytes]]:
    """``count`` sync invocations through the gateway at ``url`` (no token), pipelined on
    ``connections`` keep-alive connections: the gateway's own rate, with no client library's
    cost per request. Each answer's (status, body), in order per connection."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"args": args}).encode()
    request = (f"POST /v1/functions/{function}/invoke HTTP/1.1\r\nHost: {host}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    shares = [count // connections + (i < count % connections) for i in range(connections)]

    async def run() -> list[list[tuple[int, bytes]]]:
        return await asyncio.gather(*(_pipelined(host, int(port), request, n, depth)
                                      for n in shares))

    return [answer for part in asyncio.run(run()) for answer in part]


def seed_job(r: Any, job_id: str, namespace: str, status: str, cost_usd: float,
             finished_at: float | None = None) -> None:
    """A job record of ``namespace`` as the job store keeps it, in Redis client ``r``; no run
    behind it (a gateway started after it would resume a running one)."""
    rec = JobRecord(id=job_id, spec=JobSpec(env_id="CartPole-v1"), namespace=namespace,
                    status=status, created_at=time.time() - 3 * 86400, cost_usd=cost_usd,
                    finished_at=finished_at)
    r.set(job_record_key(job_id), rec.model_dump_json())
    r.zadd(JOBS, {job_id: rec.created_at})


def spread(model: Any) -> None:
    """Heads big enough that an untrained model's actions differ from state to state."""
    import torch

    head = {"ActorCritic": "actor", "QLearner": "online.advantage",
            "SoftActorCritic": "actor"}[type(model).__name__]
    with torch.no_grad():
        for m in model.get_submodule(head).modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.mul_(100.0)


def published_blob(model: Any, algorithm: str, env_id: str, version: int = 0) -> bytes:
    """``model``'s weights as a learner publishes a version: safetensors with its model card
    (``ParameterStore.publish``)."""
    from faasrl.data.codec import encode_tensors
    from faasrl.rl.model_card import model_card

    return encode_tensors(model.state_dict(), metadata={
        **model_card(model, env_id=env_id, algorithm=algorithm), "version": str(version)})


def evaluation_actions(algorithm: str, model: Any, obs: Any) -> Any:
    """The actions a job's evaluation (``rl.rollout.evaluate``) takes for observations
    ``obs`` (a batch, as the env gives them): the actor-critic's mode, clipped to the action
    box as the env's ``ClipAction`` does; an off-policy model's ``act`` without exploring."""
    import numpy as np
    import torch

    from faasrl.algorithms import algorithm as module_of
    from faasrl.rl.policy import ActorCritic

    spec = model.spec
    x = torch.from_numpy(np.asarray(obs, dtype=spec.obs_dtype))
    with torch.no_grad():
        if isinstance(model, ActorCritic):
            actions = model.act(x, deterministic=True)
            if spec.action_kind == "continuous":
                actions = actions.clamp(torch.tensor(spec.action_low),
                                        torch.tensor(spec.action_high))
        else:
            module = module_of(algorithm)
            actions = module.act(model, x, module.Config(), slot=0, actors=1, generator=None,
                                 explore=False)
    return actions.numpy()


def cli_output(url: str, *args: str, token: str | None = None) -> str:
    """What ``faasrl ARGS`` prints against the gateway at ``url`` (it must succeed)."""
    from typer.testing import CliRunner

    from faasrl.cli import app

    env = {"FAASRL_URL": url, "COLUMNS": "200"} | ({"FAASRL_TOKEN": token} if token else {})
    out = CliRunner().invoke(app, list(args), env=env)
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        raise out.exception
    assert out.exit_code == 0, out.output
    return out.output
