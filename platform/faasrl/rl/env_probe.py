"""The describe probe: build an env as training does, try it, run gymnasium's env checker.

:func:`probe` does it in this process; :func:`probe_in_child` runs it in a child process
(``python -m faasrl.rl.env_probe``), so that an env that loops forever is killed at the time
limit, one that eats memory or crashes the interpreter takes only the child, and users' modules
never land in the function's own ``sys.modules``. A function's handler runs on a connection's
thread, where no signal can interrupt it: a child is the only robust bound.

The child reads ``{"env_id", "env", "code"}`` (JSON) on stdin and writes, on its own copy of
stdout (the env's prints go to stderr), one line per stage it enters and a last line with the
answer: ``{"description": ...}`` or ``{"error", "stage"}``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from faasrl.contracts import DescribeArgs, DescribeResult
from faasrl.env_code import EnvCode, EnvDescription, EnvStage

PROBE_STEPS = 32  # random actions taken after reset (an episode that ends is reset)
TIMED_OUT = "timed out"
PROBE_MEMORY_SHARE = 0.5  # of the container's memory limit: the probe's child may use this much
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # gymnasium's logger colours its warnings


def probe(env_id: str, env: EnvCode | None, code: bytes | None,
          enter: Callable[[EnvStage], None] = lambda stage: None) -> EnvDescription:
    """The env's description, its spaces checked, reset and stepped, gymnasium's checker run
    on a fresh base env (its warnings kept). Raises :class:`EnvError` naming the stage;
    ``enter`` is told each stage as it begins."""
    # Imported here: the child has made fd 1 stderr by now, so nothing they print can
    # garble its answer; the function's process, which only starts children, never needs them.
    from gymnasium.utils.env_checker import check_env

    from faasrl.rl.env_loader import EnvError, env_name, install, last_lines, resolve
    from faasrl.rl.envs import build, check_env_id, describe

    name = env_name(env_id, env)
    enter("code")
    if code is not None:
        install(code, env.code_sha256 if env is not None else None)
    enter("import")
    if env is not None:
        resolve(env_id, env)
    enter("make")
    if env is None:
        try:
            check_env_id(env_id)
        except ValueError as exc:
            raise EnvError("make", str(exc), name) from None
    description = describe(env_id, env)
    enter("reset")
    built = build(env_id, env)
    stage: EnvStage = "reset"
    try:
        built.env.action_space.seed(0)
        built.env.reset(seed=0)
        stage = "step"
        for _ in range(PROBE_STEPS):
            _, _, terminated, truncated, _ = built.env.step(built.env.action_space.sample())
            if terminated or truncated:
                stage = "reset"
                built.env.reset()
                stage = "step"
        enter("check")
        stage = "check"
        base = built.env.unwrapped
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(base, skip_render_check=True)
    except Exception as exc:
        raise EnvError(stage, last_lines(exc), name) from exc
    finally:
        with contextlib.suppress(Exception):
            built.env.close()
    found = list(dict.fromkeys(ANSI.sub("", str(w.message)).removeprefix("WARN: ")
                               for w in caught))
    return description.model_copy(update={"checker_warnings": found})


def probe_in_child(env_id: str, env: EnvCode | None, code: str | None, timeout_s: float,
                   memory_mb: float | None = None
                   ) -> tuple[EnvDescription | None, str | None, EnvStage | None]:
    """(description, error, stage) of :func:`probe` run in a child process stopped (with its
    own children) after ``timeout_s``, its heap held to ``memory_mb`` (an env that eats
    memory fails with a MemoryError there); ``code``: the archive, base64."""
    request = json.dumps({"env_id": env_id, "env": env and env.model_dump(mode="json"),
                          "code": code, "memory_mb": memory_mb})
    import faasrl

    path = [str(Path(faasrl.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    child = subprocess.Popen(
        [sys.executable, "-m", "faasrl.rl.env_probe"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))})
    try:
        out, err = child.communicate(request, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        return None, f"{TIMED_OUT} after {timeout_s:g} s", _last_stage(out)
    lines = out.splitlines()
    try:
        answer = json.loads(lines[-1])
        if "description" in answer:
            return EnvDescription.model_validate(answer["description"]), None, None
        return None, answer["error"], answer["stage"]
    except (IndexError, ValueError, KeyError):  # the child died: out of memory, a crash
        tail = "\n".join(err.rstrip().splitlines()[-6:])
        return None, f"the probe exited with {child.returncode}: {tail}", _last_stage(out)


def _last_stage(out: str) -> EnvStage | None:
    stages = [line for line in out.splitlines() if not line.startswith("{")]
    return stages[-1] if stages else None  # type: ignore[return-value]


def main(stdin: IO[str], answer: IO[str]) -> None:
    """The child: one request from ``stdin``, stages and the answer to ``answer``."""
    from faasrl.rl.env_loader import EnvError, last_lines

    request = json.loads(stdin.read())
    if request["memory_mb"]:
        limit = int(request["memory_mb"]) << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    env = EnvCode.model_validate(request["env"]) if request["env"] else None

    entered: list[EnvStage] = ["code"]

    def enter(stage: EnvStage) -> None:
        entered.append(stage)
        answer.write(f"{stage}\n")
        answer.flush()

    try:
        code = base64.b64decode(request["code"], validate=True) if request["code"] else None
    except (binascii.Error, ValueError) as exc:
        reply: dict[str, Any] = {"error": f"code: not base64: {exc}", "stage": "code"}
    else:
        try:
            description = probe(request["env_id"], env, code, enter)
            reply = {"description": description.model_dump(mode="json")}
        except EnvError as exc:
            reply = {"error": exc.detail, "stage": exc.stage}
        except Exception as exc:  # not the env's own code: still an answer, at its stage
            reply = {"error": last_lines(exc), "stage": entered[-1]}
    answer.write(json.dumps(reply) + "\n")
    answer.flush()


if __name__ == "__main__":
    # The answer goes to a copy of stdout; fd 1 becomes stderr, so the env's prints (Python's
    # or C's) cannot garble it. Archives unpack into a folder that goes with the child.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    with tempfile.TemporaryDirectory(prefix="faasrl-probe-") as tmp, \
            os.fdopen(answer_fd, "w") as answer_file:
        tempfile.tempdir = tmp
        main(sys.stdin, answer_file)


def answer(call: DescribeArgs, memory_limit_mb: float) -> DescribeResult:
    """An actor function's answer to the submit's ``describe``: the probe in a child process,
    bounded by ``timeout_s`` and a share of the container's memory (``memory_limit_mb``, 0:
    none). An env that fails is an answer (error and stage), not an error of the function.
    The built-in actor answers with it, and so can one of a user's own.

    A registered id (no ``env`` code: gymnasium's, ALE's or MuJoCo's own envs, no user's) is
    probed in this process: a child's interpreter start and imports cost about 3 s of every
    such submit (``make run``'s job started that much later), and there is nothing to bound."""
    if call.env is None:
        from faasrl.rl.env_loader import EnvError, last_lines

        try:
            return DescribeResult(description=probe(call.env_id, None, None), error=None,
                                  stage=None)
        except EnvError as exc:
            return DescribeResult(description=None, error=exc.detail, stage=exc.stage)
        except Exception as exc:  # an answer still: the probe's other stages raise EnvError
            return DescribeResult(description=None, error=last_lines(exc), stage="make")
    description, error, stage = probe_in_child(
        call.env_id, call.env, call.code, call.timeout_s,
        PROBE_MEMORY_SHARE * memory_limit_mb if memory_limit_mb else None)
    return DescribeResult(description=description, error=error, stage=stage)
