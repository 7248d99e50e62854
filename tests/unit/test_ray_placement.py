"""How the Ray backend maps a manifest to actor options and placement-group bundles, fits it to
the cluster's nodes and sums the cluster's capacity: pure functions of the manifest and
``ray.nodes()``."""

from __future__ import annotations

import pytest

from faasrl.manifest import FunctionSpec
from faasrl.resources import Resources

ray_backend = pytest.importorskip("faasrl.backends.ray",
                                  reason="the Ray backend needs the ray package")
MB = 2**20


def spec(**kw) -> FunctionSpec:
    return FunctionSpec(**{"name": "f", "handler": "m:h", "cpu": 1.0, "memory_mb": 512, **kw})


def node(cpu: float, memory_mb: int, alive: bool = True, labels: dict | None = None, **custom):
    return {"Alive": alive, "Labels": labels or {},
            "Resources": {"CPU": cpu, "memory": memory_mb * MB, **custom}}


def test_actor_options_carry_the_manifest_resources_and_placement():
    options = ray_backend.actor_options(
        spec(gpu=1, ray={"resources": {"fast_disk": 1}, "strategy": "SPREAD",
                         "node_label": {"pool": "gpu"}}), "n/o/c1", "faasrl")
    assert options["num_gpus"] == 1
    # Not the function's cores: an idle actor holding them would evict its job's learner.
    assert options["num_cpus"] == ray_backend.PLACEMENT_CPU < 0.01
    assert options["memory"] == 512 * MB
    assert options["resources"] == {"fast_disk": 1}
    assert options["scheduling_strategy"] == "SPREAD"
    assert options["label_selector"] == {"pool": "gpu"}
    assert options["name"] == "n/o/c1" and options["namespace"] == "faasrl"
    assert ray_backend.actor_options(spec(), "x", "ns")["scheduling_strategy"] == "SPREAD"
    packed = ray_backend.actor_options(spec(ray={"strategy": "PACK"}), "x", "ns")
    assert packed["scheduling_strategy"] == "DEFAULT"


def test_a_hosted_containers_group_reserves_what_its_actor_would():
    """Its placement group holds the memory and custom resources, and no cores."""
    bundle = ray_backend.host_bundle(spec(ray={"resources": {"fast_disk": 1}}))
    assert bundle == {"CPU": ray_backend.PLACEMENT_CPU, "memory": 512 * MB, "fast_disk": 1}


def test_gpu_and_packed_containers_keep_an_actor_of_their_own():
    """Ray assigns GPUs to actors only, and PACK is an actor's strategy."""
    assert ray_backend.hosted_by_zygote(spec())
    assert ray_backend.hosted_by_zygote(spec(ray={"node_label": {"pool": "cpu"}}))
    assert not ray_backend.hosted_by_zygote(spec(gpu=0.25))
    assert not ray_backend.hosted_by_zygote(spec(ray={"strategy": "PACK"}))


def test_a_function_fits_when_one_alive_node_holds_all_of_it():
    nodes = [node(1, 1024), node(4, 8192, alive=False)]
    assert ray_backend.node_shortfall(spec(), nodes) == {}
    assert set(ray_backend.node_shortfall(spec(cpu=2), nodes)) == {"cpu"}  # the dead one had 4


def test_the_shortfall_names_the_manifest_field_no_node_meets():
    nodes = [node(2, 1024), node(1, 8192, labels={"pool": "cpu"})]
    short = ray_backend.node_shortfall(
        spec(ray={"resources": {"TPU": 1}, "node_label": {"pool": "gpu"}}), nodes)
    assert set(short) == {"ray.resources.TPU", "ray.node_label.pool"}
    # Each need is met by some node, but no node meets both at once.
    assert set(ray_backend.node_shortfall(spec(cpu=2, memory_mb=4096), nodes)) == {"ray"}
    assert set(ray_backend.node_shortfall(spec(), [])) == {"ray"}


def test_capacity_is_the_sum_of_the_alive_nodes():
    nodes = [node(2, 1024, GPU=1.0), node(1, 512), node(8, 8192, alive=False)]
    assert ray_backend.cluster_capacity(nodes) == Resources(3.0, 1536, 1)


def test_a_manifest_cannot_name_the_builtin_resources_as_custom_ones():
    with pytest.raises(ValueError, match="CPU"):
        spec(ray={"resources": {"CPU": 2}})
    with pytest.raises(ValueError, match="strategy"):
        spec(ray={"strategy": "STRICT_SPREAD"})
