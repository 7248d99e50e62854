"""The ``faasrl`` command as a user runs it: ``up`` in the background, other commands against it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, Platforms, fn, pid_alive, wait_for

from faasrl import code_archive
from faasrl.client import Client, GatewayError
from faasrl.redis_server import free_port

FAASRL = [sys.executable, "-m", "faasrl"]


class Up:
    """A ``faasrl up`` process on its own state dir, which ``platforms`` stops after the test
    whatever happens (also when it never wrote its gateway file)."""

    def __init__(self, platforms: Platforms, state_dir: Path, **env: str):
        self.state_dir = state_dir
        self.env = {k: v for k, v in os.environ.items() if k not in ("FAASRL_TOKEN", "FAASRL_URL")}
        self.env.update(FAASRL_STATE_DIR=str(state_dir), FAASRL_PORT="0",
                        FAASRL_MAINTAIN_INTERVAL_S="0.05", COLUMNS="200", **env)
        self.proc = platforms.add(subprocess.Popen(
            [*FAASRL, "up"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True))
        info = wait_for(self._info, timeout_s=30, what="faasrl up to write its gateway file")
        self.url, self.token = info["url"], info["token"]

    def _info(self) -> dict | None:
        path = self.state_dir / "gateway.json"
        if self.proc.poll() is not None:
            raise AssertionError(f"faasrl up exited: {self.proc.stdout.read()}")
        info = json.loads(path.read_text()) if path.exists() else None
        return info if info and info["pid"] == self.proc.pid else None  # not a killed one's

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([*FAASRL, *args], env=self.env, capture_output=True, text=True,
                             timeout=60)
        if check and out.returncode != 0:
            raise AssertionError(f"faasrl {' '.join(args)}: {out.stdout}{out.stderr}")
        return out

    def stop(self) -> str:
        """Ctrl-C; what it printed."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, out
        return out

    def children(self) -> list[int]:
        """Pids of the runtimes and Redis this platform started."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    found.append(int(entry.name))
        return found


@pytest.fixture
def up(tmp_path: Path, platforms: Platforms) -> Up:
    return Up(platforms, tmp_path / "state")


def test_up_prints_url_and_token_and_serves_the_cli(up: Up):
    assert up.token and up.url.startswith("http://127.0.0.1:")
    up.cli("functions", "deploy", str(REPO / "functions" / "echo"))
    listing = up.cli("functions", "ls").stdout
    assert "echo" in listing and "handler:main" in listing
    out = up.cli("invoke", "echo", "--json", '{"hello": "cli"}').stdout
    assert json.loads(out)["result"]["echo"] == {"hello": "cli"}
    status = up.cli("status").stdout
    assert "echo" in status and "redis ok" in status and "zygote " in status
    assert "memory ok" in status and "records " in status
    assert "echo" in up.cli("invocations").stdout
    assert "echo" in up.cli("invocations", "--status", "success").stdout
    assert "echo" not in up.cli("invocations", "--status", "error").stdout
    wrong = up.cli("invocations", "--status", "done", check=False)
    assert wrong.returncode == 2 and "--status" in wrong.stdout + wrong.stderr
    bad = up.cli("invoke", "echo", "--json", "{nope", check=False)
    assert bad.returncode != 0 and "not JSON" in bad.stdout + bad.stderr
    missing = up.cli("invoke", "nope", check=False)
    assert missing.returncode == 1 and "FunctionNotFound" in missing.stdout


def test_ctrl_c_stops_every_container_and_redis(up: Up):
    up.cli("functions", "deploy", str(REPO / "functions" / "echo"))
    up.cli("invoke", "echo")
    children = up.children()
    assert len(children) >= 2  # redis and the echo container
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(30) == 0
    assert not any(pid_alive(p) for p in children)
    assert not (up.state_dir / "gateway.json").exists()
    assert list((up.state_dir / "containers").iterdir()) == []


def test_a_killed_platform_leaves_no_child_behind(up: Up, platforms: Platforms):
    up.cli("functions", "deploy", str(REPO / "functions" / "echo"))
    up.cli("invoke", "echo")
    children = up.children()
    folders = [Path(json.loads(p.read_text())["tmp"])
               for p in (up.state_dir / "containers").glob("*.json")]
    assert folders and all(f.is_dir() for f in folders)
    up.proc.send_signal(signal.SIGKILL)
    up.proc.wait()
    wait_for(lambda: not any(pid_alive(p) for p in children), timeout_s=10,
             what="the children to die with their parent")
    again = Up(platforms, up.state_dir)  # the next start reaps what the killed one left
    assert not any(f.exists() for f in folders)
    again.stop()


def test_restart_keeps_registrations_in_the_embedded_redis(tmp_path: Path,
                                                           platforms: Platforms):
    first = Up(platforms, tmp_path / "state")
    first.cli("functions", "deploy", str(REPO / "functions" / "echo"))
    first.stop()
    second = Up(platforms, tmp_path / "state")
    assert "echo" in second.cli("functions", "ls").stdout
    assert json.loads(second.cli("invoke", "echo").stdout)["status"] == "success"


def test_the_gateway_file_is_replaced_whole_never_rewritten_in_place(make_platform,
                                                                    tmp_path: Path):
    """A CLI that opened the gateway file just before a platform wrote it reads one whole file:
    rewritten in place, it read the new one or, a moment earlier, nothing (JSONDecodeError)."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / "gateway.json"
    stale = json.dumps({"url": "http://127.0.0.1:1", "token": "old", "pid": 1})
    path.write_text(stale)  # as a killed platform leaves it
    with open(path) as opened_before:
        platform = make_platform(state_dir=state)
        assert opened_before.read() == stale
    assert json.loads(path.read_text())["url"] == platform.url
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in state.iterdir() if p.name.startswith(".gateway")] == []


def test_second_platform_on_the_same_state_dir_is_refused(up: Up):
    other = subprocess.run([*FAASRL, "up"], env=up.env, capture_output=True, text=True,
                           timeout=60)
    assert other.returncode != 0
    assert "another faasrl platform is running" in other.stdout + other.stderr


def test_submit_follow_jobs_and_plot(up: Up, tmp_path: Path):
    spec = tmp_path / "short.yaml"
    spec.write_text("env_id: CartPole-v1\nenvs_per_actor: 2\nsteps_per_actor: 16\n"
                    "controller: {name: fixed, actors: 1}\nevaluation_episodes: 1\n"
                    "stop: {max_rounds: 500, max_env_steps: 64}\n")  # 32 steps a round
    out = up.cli("submit", str(spec), "--follow").stdout
    assert "succeeded: max_env_steps (64) reached" in out and "serverful" in out
    # The bar ends complete at the rounds the job took, saying why, not at "2/500".
    [bar] = [line for line in out.splitlines() if "CartPole-v1" in line]
    assert "2/2 rounds" in bar and "max_env_steps (64) reached" in bar, bar
    job_id = re.search(r"job ([0-9a-f]{12})", out).group(1)
    listed = up.cli("jobs").stdout
    assert job_id in listed and "succeeded" in listed
    png = tmp_path / "curve.png"
    up.cli("plot", job_id, "-o", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("env_id: CartPole-v1\ncontroller: {name: fixed, actors: 0}\n")
    refused = up.cli("submit", str(bad), check=False)
    assert refused.returncode != 0 and "controller.fixed.actors" in refused.stdout + refused.stderr


def test_submit_uploads_the_env_folder_named_relative_to_the_spec(up: Up, tmp_path: Path):
    """The spec's env.code_dir is read next to the spec file (not in the working directory),
    packed, uploaded, and the job names the archive by its digest."""
    mine = tmp_path / "mine"
    shutil.copytree(REPO / "examples" / "custom-env", mine)
    out = up.cli("submit", str(mine / "corridor.yaml")).stdout
    job_id = re.search(r"job ([0-9a-f]{12})", out).group(1)
    with Client(up.url, up.token) as client:
        env = client.job(job_id)["spec"]["env"]
        try:
            client.cancel_job(job_id)
        except GatewayError as err:  # the corridor is quick to learn: it may have ended already
            assert err.status == 409, err
    assert env["code_sha256"] == code_archive.digest(code_archive.pack(mine / "env"))
    shutil.rmtree(mine / "env")
    refused = up.cli("submit", str(mine / "corridor.yaml"), check=False)
    assert refused.returncode == 2 and "env.code_dir" in refused.stderr, refused


def test_the_token_is_made_once_kept_and_read_back(tmp_path: Path, platforms: Platforms):
    first = Up(platforms, tmp_path / "state")
    token = first.token
    assert first.cli("token").stdout.strip() == token
    kept = first.state_dir / "token"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert f"{token}   (new)" in first.stop()
    second = Up(platforms, tmp_path / "state")
    assert second.token == token  # a restart keeps it
    assert second.cli("token").stdout.strip() == token
    assert "echo" in second.cli("functions", "ls").stdout
    out = second.stop()
    assert token not in out and "faasrl token" in out  # printed once, when made


def test_a_given_token_wins_and_an_empty_one_counts_as_none(tmp_path: Path,
                                                            platforms: Platforms):
    given = Up(platforms, tmp_path / "given", FAASRL_TOKEN="given-token")
    assert given.token == "given-token"
    assert given.cli("token").stdout.strip() == "given-token"
    assert not (given.state_dir / "token").exists()
    assert "given-token" not in given.stop()
    empty = Up(platforms, tmp_path / "empty", FAASRL_TOKEN="")  # compose passes an unset one so
    assert empty.token and empty.token == (empty.state_dir / "token").read_text().strip()


def test_up_on_a_redis_it_cannot_use_says_why_without_a_traceback(tmp_path: Path):
    """The start checks the Redis it is given (reachable, 6.0 or later) before serving."""
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    env = {k: v for k, v in os.environ.items() if k != "FAASRL_TOKEN"}
    env.update(FAASRL_STATE_DIR=str(tmp_path / "state"), FAASRL_PORT="0", FAASRL_REDIS_URL=url,
               COLUMNS="200")
    out = subprocess.run([*FAASRL, "up"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    assert f"error: cannot reach Redis at {url}" in out.stdout, out
    assert "Traceback" not in out.stdout + out.stderr


def test_token_without_a_platform_says_where_it_looked(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "FAASRL_TOKEN"}
    out = subprocess.run([*FAASRL, "token", "--state-dir", str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and str(tmp_path / "token") in out.stdout + out.stderr


def test_dead_letters_listed_redriven_and_deleted(tmp_path: Path, platforms: Platforms):
    up = Up(platforms, tmp_path / "state")
    with Client(up.url, up.token) as client:
        client.deploy(fn("t", handler="fns:boom", maximum_retry_attempts=0))
        ids = [up.cli("invoke", "t", "--async", "--json", str(n)).stdout.strip()
               for n in range(2)]
        wait_for(lambda: len(client.dead_letters("t")) == 2, what="two dead letters")
        listing = up.cli("dead-letters", "t").stdout
        assert all(i in listing for i in ids) and "ValueError" in listing
        assert "RetriesExhausted" in listing and "2 dead letter(s)" in listing
        out = up.cli("dead-letters", "t", "--redrive", ids[0]).stdout
        assert f"redrove {ids[0]} as invocation" in out
        up.cli("dead-letters", "t", "--delete", ids[1])
        both = up.cli("dead-letters", "t", "--redrive-all", "--delete", ids[1], check=False)
        assert both.returncode == 2 and "one of" in both.stdout + both.stderr
        wait_for(lambda: [d["args"] for d in client.dead_letters("t")] == [0],
                 what="the redriven one to fail again")
        missing = up.cli("dead-letters", "t", "--delete", ids[1], check=False)
        assert missing.returncode == 1 and "no dead letter" in missing.stdout
