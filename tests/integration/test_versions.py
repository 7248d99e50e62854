"""Published versions and aliases over real HTTP on a real gateway (process backend)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import cli_output, fn, namespace_key

from faasrl.client import Client, GatewayError

TOKEN = "versions-token"


def handler_folder(folder: Path, answer: str) -> str:
    """A function folder whose handler answers ``answer`` (what a version runs shows)."""
    folder.mkdir(exist_ok=True)
    (folder / "h.py").write_text(f"def main(args, context):\n    return {answer!r}\n")
    return str(folder)


def test_a_version_is_immutable_and_publishing_unchanged_code_returns_it(client, tmp_path):
    folder = handler_folder(tmp_path / "code", "v1")
    client.deploy(fn("f", handler="h:main", code_dir=folder, env={"MODEL": "1"}))
    first = client.publish_version("f")
    assert first["version"] == 1 and first["manifest"]["env"] == {"MODEL": "1"}
    assert client.publish_version("f")["version"] == 1  # nothing changed: the same version

    handler_folder(tmp_path / "code", "v2")  # the code changes, then the config
    client.deploy(fn("f", handler="h:main", code_dir=folder, env={"MODEL": "2"}))
    second = client.publish_version("f")
    assert second["version"] == 2 and second["code_sha256"] != first["code_sha256"]
    assert [v["version"] for v in client.versions("f")] == [1, 2]

    assert client.invoke("f")["result"] == "v2"  # $LATEST moved on
    old = client.invoke("f", qualifier="1")
    assert old["result"] == "v1" and old["version"] == 1  # version 1 runs its own code
    assert client.invocation(old["id"])["version"] == 1
    assert client.invoke("f")["version"] is None
    assert client.invoke("f", qualifier="$LATEST")["result"] == "v2"
    with pytest.raises(GatewayError) as missing:
        client.invoke("f", qualifier="7")
    assert missing.value.status == 404


def test_a_version_keeps_its_config_after_the_function_changes(client):
    client.deploy(fn("cfg", handler="fns:env", env={"MODEL": "3"}))
    client.publish_version("cfg")
    client.deploy(fn("cfg", handler="fns:env", env={"MODEL": "4"}))
    client.set_alias("cfg", "live", 1)
    assert client.invoke("cfg", ["MODEL"], qualifier="live")["result"] == {"MODEL": "3"}
    assert client.invoke("cfg", ["MODEL"])["result"] == {"MODEL": "4"}
    queued = client.invoke_async("cfg", ["MODEL"], qualifier="live")
    done = client.wait(queued)
    assert done["result"] == {"MODEL": "3"} and done["version"] == 1


def test_an_alias_moved_answers_from_the_new_version_and_in_flight_ones_finish_on_the_old(
        client):
    client.deploy(fn("s", handler="fns:sleep", env={"V": "1"}))
    client.publish_version("s")
    client.deploy(fn("s", handler="fns:sleep", env={"V": "2"}))
    client.publish_version("s")
    client.set_alias("s", "live", 1)
    client.invoke("s", {"s": 0}, qualifier="live")  # its container is warm
    slow: dict = {}
    url, token = client.url, client._http.headers.get("authorization")

    def in_flight() -> None:
        with Client(url, token.removeprefix("Bearer ") if token else None) as c:
            slow.update(c.invoke("s", {"s": 1.5}, qualifier="live"))

    thread = threading.Thread(target=in_flight)
    thread.start()
    time.sleep(0.5)  # it runs on version 1
    moved = client.set_alias("s", "live", 2)
    assert moved["version"] == 2
    assert client.invoke("s", {"s": 0}, qualifier="live")["version"] == 2
    thread.join(10)
    assert slow["status"] == "success" and slow["version"] == 1


def test_a_canary_at_ten_percent_routes_ten_percent(client):
    client.deploy(fn("c", env={"V": "1"}))
    client.publish_version("c")
    client.deploy(fn("c", env={"V": "2"}))
    client.publish_version("c")
    alias = client.set_alias("c", "live", 1, canary={2: 0.1})
    assert alias["routing"] == {"additional_version_weights": {"2": 0.1}}
    versions = Counter(client.invoke("c", qualifier="live")["version"] for _ in range(2000))
    assert abs(versions[2] - 200) <= 60 and versions[1] + versions[2] == 2000


def test_an_aliased_version_cannot_be_deleted_and_bad_aliases_name_the_field(client):
    client.deploy(fn("d"))
    client.publish_version("d")
    client.set_alias("d", "prod", 1)
    with pytest.raises(GatewayError) as used:
        client.delete_version("d", 1)
    assert used.value.status == 409 and "prod" in used.value.message
    for version, canary, field in ((9, None, "version"), (1, {1: 0.5}, "routing"),
                                   (1, {1: 1.5}, "routing")):
        with pytest.raises(GatewayError) as bad:
            client.set_alias("d", "prod", version, canary)
        assert bad.value.status == 422 and field in bad.value.fields
    client.delete_alias("d", "prod")
    client.delete_version("d", 1)
    assert client.versions("d") == []
    assert client.publish_version("d")["version"] == 2  # numbers are never reused


def test_versions_and_aliases_are_their_namespaces(make_platform):
    platform = make_platform(token=TOKEN)
    client = Client(platform.url, TOKEN)
    client.deploy(fn("mine"))
    client.publish_version("mine")
    client.set_alias("mine", "live", 1)
    _, key = namespace_key(platform, "other")
    with client, Client(platform.url, key) as other:
        other.deploy(fn("mine"))  # a function of the same name in another namespace
        assert other.versions("mine") == [] and other.aliases("mine") == []
        for call in (lambda: other.alias("mine", "live"),
                     lambda: other.invoke("mine", qualifier="live"),
                     lambda: other.invoke("mine", qualifier="1")):
            with pytest.raises(GatewayError) as missing:
                call()
            assert missing.value.status == 404


def test_versions_come_back_after_a_restart_and_go_with_their_function(make_platform):
    first = make_platform()
    with first.client() as c:
        c.deploy(fn("r", handler="fns:env", env={"MODEL": "a"}))
        c.publish_version("r")
        c.set_alias("r", "live", 1, canary={})
        c.deploy(fn("r", handler="fns:env", env={"MODEL": "b"}))
    first.stop()
    again = make_platform()
    with again.client() as c:
        assert c.invoke("r", ["MODEL"], qualifier="live")["result"] == {"MODEL": "a"}
        c.delete("r")
        c.deploy(fn("r"))
        assert c.versions("r") == [] and c.aliases("r") == []


def test_the_cli_publishes_lists_and_routes(platform, client):
    client.deploy(fn("k"))
    url = platform.url
    assert "version 1" in cli_output(url, "functions", "publish", "k", "--description", "one")
    client.deploy(fn("k", env={"V": "2"}))
    cli_output(platform.url, "functions", "publish", "k")
    assert "version 1 (canary: version 2 at 10%)" in cli_output(
        platform.url, "functions", "alias", "k", "live", "--version", "1", "--canary", "2:0.1")
    listing = cli_output(platform.url, "functions", "versions", "k")
    assert "one" in listing and "V=2" in listing and "2 at 10%" in listing
    assert '"version": 1' in cli_output(platform.url, "invoke", "k", "--qualifier", "1")
