"""What the Docker backend asks the engine for, per function (no engine needed)."""

from __future__ import annotations

from pathlib import Path

from faasrl.backends.docker import (
    DockerConfig,
    container_options,
    mounted_as,
    stem_options,
    working_dir,
)
from faasrl.env_layers import LAYERS_ENV, LAYERS_MOUNT
from faasrl.manifest import FunctionSpec
from faasrl.resources import host_cores
from faasrl.runtime.gpu import FRACTION_ENV, MPS_PERCENTAGE_ENV

CONFIG = DockerConfig(node="n1", functions_dir=Path("/srv/faasrl/functions"))


def spec(**kw) -> FunctionSpec:
    return FunctionSpec(**{"name": "learner", "handler": "handler:main", "cpu": 2,
                           "memory_mb": 4096, **kw})


def test_gpus_become_a_device_request_for_their_indices():
    opts = container_options(spec(gpu=2), "c1", (1, 3), CONFIG, "42:7", "s3cret")
    assert opts["image"] == CONFIG.gpu_image
    [request] = opts["device_requests"]
    assert request["DeviceIDs"] == ["1", "3"] and request["Capabilities"] == [["gpu"]]
    assert opts["environment"]["NVIDIA_VISIBLE_DEVICES"] == "1,3"


def test_a_gpu_fraction_is_one_device_and_its_share_without_mps():
    opts = container_options(spec(gpu=0.25), "c1", (2,), CONFIG, "42:7", "s3cret")
    [request] = opts["device_requests"]
    assert request["DeviceIDs"] == ["2"]
    assert opts["environment"][FRACTION_ENV] == "0.25"
    assert MPS_PERCENTAGE_ENV not in opts["environment"]


def test_no_gpus_no_device_request_and_every_gpu_hidden():
    opts = container_options(spec(), "c1", (), CONFIG, "42:7", "s3cret")
    assert opts["image"] == CONFIG.image
    assert "device_requests" not in opts
    assert opts["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_limits_user_and_labels():
    opts = container_options(spec(cpu=1.5, memory_mb=300), "c9", (), CONFIG, "42:7", "s3cret")
    assert opts["nano_cpus"] == 1_500_000_000
    assert opts["mem_limit"] == opts["memswap_limit"] == "300m"
    assert opts["read_only"] and opts["user"] == "10001:10001" and opts["cap_drop"] == ["ALL"]
    assert opts["labels"] == {"faasrl.function": "learner", "faasrl.container": "c9",
                              "faasrl.node": "n1", "faasrl.owner": "42:7"}
    assert opts["environment"]["OMP_NUM_THREADS"] == "1"
    assert opts["environment"]["FAASRL_RUNTIME_SECRET"] == "s3cret"
    assert "volumes" not in opts and "mounts" not in opts
    assert opts["extra_hosts"] == {"host.docker.internal": "host-gateway"}


def test_a_function_lent_cores_is_limited_to_its_cpu_max_within_the_hosts_cores():
    host = host_cores()
    lent = container_options(spec(cpu=1, cpu_max=host + 8), "c1", (), CONFIG, "42:7", "s3cret")
    assert lent["nano_cpus"] == int(host * 1e9)  # Docker refuses a limit beyond the host's
    assert lent["environment"]["OMP_NUM_THREADS"] == "1"  # its own cores until a run is lent more
    below = container_options(spec(cpu=1, cpu_max=1.5), "c2", (), CONFIG, "42:7", "s3cret")
    assert below["nano_cpus"] == int(min(1.5, max(1.0, host)) * 1e9)


def test_an_image_named_by_the_function_wins():
    opts = container_options(spec(image="me/fn:1"), "c1", (0,), CONFIG, "1:1", "s3cret")
    assert opts["image"] == "me/fn:1"


def test_working_dir_maps_built_ins_into_the_image():
    builtin = spec(code_dir="/srv/faasrl/functions/learner")
    assert working_dir(builtin, CONFIG) == "/opt/faasrl/functions/learner"
    assert working_dir(spec(code_dir="/home/me/fn"), CONFIG) is None
    shipped = spec(code_dir="/srv/faasrl/functions/learner", code_sha256="a" * 64)
    assert working_dir(shipped, CONFIG) is None  # the runtime unpacks it


def test_a_stem_cell_is_a_function_container_without_a_function():
    stem = stem_options(CONFIG.image, "s1", CONFIG, "42:7", "s3cret", 1024)
    function = container_options(spec(), "c1", (), CONFIG, "42:7", "s3cret")
    assert stem["command"] == [*function["command"], "--stem-cell"]
    assert stem["labels"] == {"faasrl.stem_cell": "true", "faasrl.container": "s1",
                              "faasrl.node": "n1", "faasrl.owner": "42:7"}
    assert stem["name"] == "faasrl-stem-s1"
    # What every container's environment has, nothing of a function's (it comes at /init).
    common = {k: v for k, v in function["environment"].items() if k != "FAASRL_CONTAINER_ID"}
    assert stem["environment"] == {**common, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # One core at a quarter of a function's weight, its own memory; the same confinement.
    assert (stem["cpu_quota"], stem["cpu_period"], stem["cpu_shares"]) == (100_000, 100_000, 256)
    assert stem["mem_limit"] == stem["memswap_limit"] == "1024m" and "nano_cpus" not in stem
    for key in ("user", "read_only", "tmpfs", "pids_limit", "cap_drop", "security_opt", "init",
                "network", "extra_hosts"):
        assert stem[key] == function[key], key


def test_env_layers_are_mounted_read_only_in_functions_and_stem_cells():
    layered = DockerConfig(node="n1", env_layers_dir=Path("/var/lib/faasrl/env-layers"))
    for opts in (container_options(spec(), "c1", (), layered, "42:7", "s", "cp3.11.2-k"),
                 stem_options("img", "s1", layered, "42:7", "s", 512, "cp3.11.2-k")):
        [mount] = opts["mounts"]
        assert mount["Type"] == "bind" and mount["ReadOnly"] is True
        assert mount["Source"] == "/var/lib/faasrl/env-layers"
        assert mount["Target"] == LAYERS_MOUNT
        assert opts["environment"][LAYERS_ENV] == f"{LAYERS_MOUNT}/cp3.11.2-k"
    # A gateway in a container (compose) names the volume the engine knows the folder as.
    compose = DockerConfig(node="n1", env_layers_dir=Path("/var/lib/faasrl/env-layers"),
                           env_layers_source="faasrl-env-layers")
    [mount] = container_options(spec(), "c1", (), compose, "42:7", "s", "k")["mounts"]
    assert mount["Type"] == "volume" and mount["Source"] == "faasrl-env-layers"
    assert mount["ReadOnly"] is True
    # Without a target (no layers folder, or the image could not say): no mount at all.
    assert "mounts" not in container_options(spec(), "c1", (), layered, "42:7", "s")
    assert LAYERS_ENV not in container_options(spec(), "c1", (), layered, "42:7", "s")[
        "environment"]


def test_a_gateway_in_a_container_mounts_what_its_own_layers_folder_is():
    folder = Path("/var/lib/faasrl/env-layers")
    mounts = [{"Type": "volume", "Name": "p_gateway-state", "Destination": "/var/lib/faasrl"},
              {"Type": "volume", "Name": "p_env-layers", "Destination": str(folder)},
              {"Type": "bind", "Source": "/var/run/docker.sock",
               "Destination": "/var/run/docker.sock"}]
    assert mounted_as(mounts, folder) == "p_env-layers"
    bind = [{"Type": "bind", "Source": "/srv/layers", "Destination": str(folder)}]
    assert mounted_as(bind, folder) == "/srv/layers"
    assert mounted_as(mounts[:1], folder) is None  # inside another mount: not reachable
