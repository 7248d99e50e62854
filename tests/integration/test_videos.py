"""Videos of the agent: a job's final evaluation recorded to mp4 (decoded back with imageio),
served with its namespace's other data (Range for players), played on demand for a chosen
version, refused clearly, and deleted with the job."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import imageio.v3 as iio
import pytest
from helpers import CORRIDOR_DIR, namespace_key, succeeded

from faasrl.client import Client, GatewayError
from faasrl.rl.video import MAX_FRAMES

PLATFORM = {"register_builtins": True, "token": "videos-token"}  # a token: namespaces apart
TINY = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
        "controller": {"name": "fixed", "actors": 1}, "evaluation_episodes": 2,
        "stop": {"max_rounds": 2}}
CARTPOLE_FRAME = (400, 600, 3)  # its rgb_array render: height, width, channels
# The test corridor, rendered: one 32x48 frame whose bright column is the agent's cell.
PAINTED = """\
import numpy as np

from corridor import Corridor


class Painted(Corridor):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None, **kwargs):
        super().__init__(**kwargs)
        self.render_mode = render_mode

    def render(self):
        frame = np.zeros((32, 48, 3), dtype=np.uint8)
        frame[:, 6 * self.position:6 * self.position + 6] = 255
        return frame
"""


def decoded(blob: bytes, tmp_path: Path, name: str) -> list:
    path = tmp_path / name
    path.write_bytes(blob)
    return list(iio.imiter(path))


def test_a_jobs_final_evaluation_records_videos_that_decode_and_stay_in_its_namespace(
        platform, client: Client, tmp_path: Path):
    job = client.submit({**TINY, "evaluation": {"video": True, "episodes": 2}})
    done = succeeded(client, job["id"], timeout_s=180)
    assert done["video"]["status"] == "recorded", done["video"]
    videos = client.videos(job["id"])
    assert [v["n"] for v in videos] == done["video"]["videos"] == [0, 1]
    assert {v["source"] for v in videos} == {"evaluation"}
    assert all(v["version"] == done["version"] for v in videos)
    for v in videos:
        frames = decoded(client.video(job["id"], v["n"]), tmp_path, f"{v['n']}.mp4")
        assert 0 < len(frames) == v["frames"] <= MAX_FRAMES
        assert frames[0].shape == CARTPOLE_FRAME == (v["height"], v["width"], 3)
        assert frames[0].std() > 0  # a picture, not a blank frame

    with httpx.Client(base_url=platform.url,
                      headers={"Authorization": f"Bearer {platform.token}"}) as http:
        whole = http.get(f"/v1/jobs/{job['id']}/videos/0")
        assert whole.headers["content-type"] == "video/mp4"
        part = http.get(f"/v1/jobs/{job['id']}/videos/0", headers={"Range": "bytes=0-99"})
        assert part.status_code == 206 and part.content == whole.content[:100]
        assert http.get(f"/v1/jobs/{job['id']}/videos/7").status_code == 404
        assert http.get(f"/v1/jobs/{job['id']}/videos/-1").status_code == 422

    _, key = namespace_key(platform, "lab-b")
    with Client(platform.url, key) as other:
        for call in (lambda: other.videos(job["id"]), lambda: other.video(job["id"], 0),
                     lambda: other.play(job["id"])):
            with pytest.raises(GatewayError) as err:
                call()
            assert err.value.status == 404

    # played on demand: the chosen version, appended after the evaluation's
    played = client.play(job["id"], version=done["version"])
    assert (played["n"], played["version"], played["source"]) == (2, done["version"], "play")
    frames = decoded(client.video(job["id"], 2), tmp_path, "2.mp4")
    assert len(frames) == played["frames"] > 0
    with pytest.raises(GatewayError) as err:
        client.play(job["id"], version=10_000)
    assert err.value.status == 404 and "version 10000" in str(err.value)

    # the CLI: download the newest, play a version to a file
    cli = [sys.executable, "-m", "faasrl", "--url", platform.url, "--token", platform.token,
           "jobs"]
    out = subprocess.run([*cli, "video", job["id"], "-o", str(tmp_path / "cli.mp4")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "wrote video 2" in out and (tmp_path / "cli.mp4").read_bytes() == \
        client.video(job["id"], 2)
    out = subprocess.run([*cli, "play", job["id"], "--version", str(done["version"]), "-o",
                          str(tmp_path / "played.mp4")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert f"wrote video 3 (version {done['version']}" in out
    assert len(decoded((tmp_path / "played.mp4").read_bytes(), tmp_path, "3.mp4")) > 0

    client.delete_job(job["id"])
    assert not platform.settings.state_dir.joinpath("jobs", job["id"]).exists()


@pytest.mark.parametrize(("evaluation", "field"), [
    ({"video": True, "episodes": 0}, "evaluation.episodes"),
    ({"video": True, "episodes": 11}, "evaluation.episodes"),
    ({"video": "yes please"}, "evaluation.video"),
])
def test_video_settings_out_of_bounds_are_refused_naming_the_field(
        client: Client, evaluation: dict, field: str):
    with pytest.raises(GatewayError) as err:
        client.submit({**TINY, "evaluation": evaluation})
    assert err.value.status == 422 and field in str(err.value)


def corridor(client: Client, folder: Path, entry_point: str) -> dict:
    """A tiny job on the test corridor brought as code, with videos asked for."""
    shutil.copytree(CORRIDOR_DIR, folder)
    (folder / "painted.py").write_text(PAINTED)
    return {**TINY, "env_id": entry_point, "evaluation": {"video": True},
            "env": {"code_sha256": client.upload_code(folder), "entry_point": entry_point}}


def test_an_env_brought_as_code_is_recorded_if_it_renders_and_says_why_not_if_not(
        client: Client, tmp_path: Path):
    painted = client.submit(corridor(client, tmp_path / "a", "painted:Painted"))
    plain = client.submit(corridor(client, tmp_path / "b", "corridor:Corridor"))
    done = succeeded(client, painted["id"], timeout_s=180)
    assert done["video"]["status"] == "recorded", done["video"]
    (shown,) = client.videos(painted["id"])
    frames = decoded(client.video(painted["id"], 0), tmp_path, "painted.mp4")
    assert len(frames) == shown["frames"] > 1 and frames[0].shape == (32, 48, 3)

    done = succeeded(client, plain["id"], timeout_s=180)  # no video is no failure
    assert done["video"]["status"] == "unavailable", done["video"]
    assert "render" in done["video"]["message"], done["video"]
    assert client.videos(plain["id"]) == []
    with pytest.raises(GatewayError) as err:
        client.play(plain["id"])
    assert err.value.status == 409 and "render" in str(err.value)


def test_an_off_policy_job_is_recorded_acting_greedily(client: Client, tmp_path: Path):
    job = client.submit({**TINY, "algorithm": "dqn", "steps_per_actor": 64,
                         "evaluation": {"video": True}})
    done = succeeded(client, job["id"], timeout_s=180)
    assert done["video"]["status"] == "recorded", done["video"]
    (shown,) = client.videos(job["id"])
    assert len(decoded(client.video(job["id"], 0), tmp_path, "dqn.mp4")) == shown["frames"] > 0
