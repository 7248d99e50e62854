"""The job page plays the job's videos: an HTML5 player whose source is the video route's mp4
(fetched with the token into a blob: URL), which the browser decodes (a positive duration),
and Play records one more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from browsing import css, log_in, stray_text, until
from helpers import succeeded

from faasrl.client import Client

TOKEN = "job-videos-ui-token"
PLATFORM = {"register_builtins": True, "token": TOKEN}  # conftest's platform
JOB = {"name": "ui-video", "env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
       "evaluation_episodes": 1, "stop": {"max_rounds": 2},
       "controller": {"name": "fixed", "actors": 1}, "evaluation": {"video": True}}
# What the player says of its source once it has read the file's header.
PLAYER = """
const v = document.querySelector(arguments[0]);
return v && v.readyState >= 1 ? {duration: v.duration, width: v.videoWidth,
                                 height: v.videoHeight, src: v.currentSrc} : null;
"""


def test_the_job_page_plays_the_jobs_video(browser: Any, client: Client, platform: Any,
                                           screenshots: Path) -> None:
    job = client.submit(JOB)
    assert succeeded(client, job["id"], timeout_s=180)["video"]["status"] == "recorded"
    log_in(browser, platform.url, TOKEN)
    browser.get(f"{platform.url}/ui/#/jobs/{job['id']}")
    player = until(browser, "the video's player",
                   lambda: browser.execute_script(PLAYER, "#job-video-0"))
    assert player["duration"] > 0 and (player["width"], player["height"]) == (600, 400)
    assert player["src"].startswith("blob:")
    video = css(browser, "#job-video-0")  # its blob: holds the route's answer, of its type
    assert video.get_attribute("data-source") == f"/v1/jobs/{job['id']}/videos/0"
    assert video.get_attribute("data-type") == "video/mp4"
    assert "version" in css(browser, "#job-videos figcaption").text
    browser.save_screenshot(str(screenshots / "job-video.png"))

    css(browser, "#job-play").click()
    until(browser, "the played video's player",
          lambda: browser.execute_script(PLAYER, "#job-video-1"))
    until(browser, "the recording said", lambda: "recorded video 1" in
          css(browser, "#action-result").text)
    assert not stray_text(browser)
