"""Every extension point's registry, walked entry by entry against its kind's Protocol.

Algorithms, workflows (a job's ``execution``), controllers and backends are registered the same
way (:class:`faasrl.registry.Registry`); the job spec's and the settings' Literals and unions
come from those registries. A new entry that lacks a piece of its kind's surface fails here,
naming the piece, before any job reaches it.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from faasrl.algorithms import ALGORITHMS
from faasrl.algorithms.offpolicy import ReplayConfig
from faasrl.algorithms.surface import Algorithm, OffPolicyAlgorithm
from faasrl.backends import BACKENDS, SERVICES, Backend, BackendFactory, ServiceFactory
from faasrl.backends.service import ServiceBackend
from faasrl.config import Settings
from faasrl.controllers import CONTROLLERS, Controller, ControllerEntry
from faasrl.jobs.executions import WORKFLOWS, WorkflowFactory
from faasrl.jobs.spec import JobSpec, Placement
from faasrl.manifest import FunctionSpec
from faasrl.registry import Registry
from faasrl.rl.envs import env_family
from faasrl.workflow.job import Workflow

# Every family env_family names, by an id of each: a module's FAMILY_DEFAULTS covers them all.
FAMILIES = {env_family(env_id) for env_id in ("CartPole-v1", "Hopper-v5", "ALE/Pong-v5",
                                              "MyCorridor-v0")}


def protocol_members(protocol: type) -> dict[str, Any]:
    """A Protocol's members, its bases' included: name -> the method, or None for an
    attribute."""
    members: dict[str, Any] = {}
    for cls in reversed(protocol.__mro__):
        if not getattr(cls, "_is_protocol", False) or cls is typing.Protocol:
            continue
        members.update(dict.fromkeys(inspect.get_annotations(cls)))
        members.update({k: v for k, v in cls.__dict__.items()
                        if inspect.isfunction(v) and not k.startswith("_")})
    return members


def signature_problems(name: str, expected: Callable[..., Any], actual: Callable[..., Any],
                       *, method: bool = False) -> list[str]:
    """How ``actual``'s parameters differ from the Protocol method ``expected``'s (``self``
    dropped, and from ``actual`` too when it is a ``method`` read off its class): positional
    ones in order, keyword-only ones by name, and a default wherever the Protocol has one."""
    want = list(inspect.signature(expected).parameters.values())[1:]
    got = dict(list(inspect.signature(actual).parameters.items())[1 if method else 0:])
    positional = [p.name for p in got.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    problems = []
    want_positional = [p.name for p in want if p.kind == p.POSITIONAL_OR_KEYWORD]
    if positional[:len(want_positional)] != want_positional:
        problems.append(f"{name}: positional parameters {positional}, expected "
                        f"{want_positional} first")
    for p in want:
        if p.kind == p.KEYWORD_ONLY and (p.name not in got or got[p.name].kind
                                         not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)):
            problems.append(f"{name}: no keyword parameter {p.name!r}")
        elif p.default is not p.empty and p.name in got and got[p.name].default is p.empty:
            problems.append(f"{name}: parameter {p.name!r} needs a default")
    return problems


def surface_problems(entry: Any, protocol: type, *, skip: set[str] = frozenset()) -> list[str]:
    """What ``entry`` (a module or a class) lacks of ``protocol``: members, callables, their
    parameter names."""
    problems = []
    for name, method in protocol_members(protocol).items():
        if name in skip:
            continue
        if not hasattr(entry, name):
            problems.append(f"{name}: missing")
        elif method is not None:
            actual = getattr(entry, name)
            if not callable(actual):
                problems.append(f"{name}: not callable")
            else:
                problems += signature_problems(name, method, actual, method=isinstance(
                    entry, type) and inspect.isfunction(inspect.getattr_static(entry, name)))
    return problems


def algorithm_problems(module: types.ModuleType, name: str, *, skip: set[str] = frozenset()
                       ) -> list[str]:
    """Everything the platform expects of algorithm module ``module`` registered as ``name``."""
    problems = surface_problems(module, Algorithm, skip=skip)
    if problems:
        return problems
    if name != module.NAME:
        problems.append(f"NAME is {module.NAME!r}, registered as {name!r}")
    cfg = module.Config
    if not (isinstance(cfg, type) and issubclass(cfg, BaseModel)):
        return [*problems, "Config: not a pydantic model"]
    if cfg.__name__ != f"{name.upper()}Config" or getattr(module, cfg.__name__, None) is not cfg:
        problems.append(f"Config: named {cfg.__name__!r}, not exported as "
                        f"{name.upper()}Config")
    tag = cfg.model_fields.get("algorithm")
    if tag is None or get_args(tag.annotation) != (name,) or tag.default != name:
        problems.append(f"Config.algorithm: must be Literal[{name!r}] = {name!r}")
    if cfg.model_config.get("extra") != "forbid":
        problems.append("Config: must refuse unknown fields (faasrl.user_input.STRICT)")
    problems += [f"Config: no field {f!r}" for f in ("learning_rate", "anneal_lr", "gamma")
                 if f not in cfg.model_fields]
    if not module.EXECUTIONS or not set(module.EXECUTIONS) <= set(WORKFLOWS):
        problems.append(f"EXECUTIONS {module.EXECUTIONS!r}: not a non-empty subset of the "
                        f"registered workflows {list(WORKFLOWS)}")
    for execution in set(module.EXECUTIONS) & set(WORKFLOWS):
        problems += [f"{p} (execution {execution})" for p in surface_problems(
            module, WORKFLOWS[execution].ALGORITHM_SURFACE, skip=skip)]
    if "offpolicy" in module.EXECUTIONS and not issubclass(cfg, ReplayConfig):
        problems.append("Config: an off-policy one must be a ReplayConfig")
    if isinstance(module, OffPolicyAlgorithm) and not (
            module.ACTION_KINDS and set(module.ACTION_KINDS) <= {"discrete", "continuous"}):
        problems.append(f"ACTION_KINDS {module.ACTION_KINDS!r}")
    for family in sorted(FAMILIES - set(module.FAMILY_DEFAULTS)):
        problems.append(f"FAMILY_DEFAULTS: no {family!r}")
    for family, defaults in module.FAMILY_DEFAULTS.items():
        problems += [f"FAMILY_DEFAULTS[{family!r}]: no {k!r}"
                     for k in ("envs_per_actor", "steps_per_actor") if k not in defaults]
        try:
            cfg.model_validate(defaults.get("hyperparameters", {}))
        except ValueError as exc:
            problems.append(f"FAMILY_DEFAULTS[{family!r}]: {exc}")
    return problems


# -- the registry itself ---------------------------------------------------------------------


def test_a_registry_names_its_entries_once_and_refuses_unknown_names_by_kind():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)

    @reg.register("b")
    def b() -> None: ...

    assert list(reg) == ["a", "b"] and reg["b"] is b and "a" in reg and reg.get("z") is None
    with pytest.raises(ValueError, match="widget 'a' is registered already"):
        reg.register("a", 2)
    with pytest.raises(ValueError, match=r"widget must be one of \['a', 'b'\], not 'z'"):
        reg.require("z")
    assert get_args(reg.literal()) == ("a", "b")


def test_an_entry_given_by_import_path_is_imported_on_first_lookup():
    reg: Registry[Any] = Registry("widget")
    reg.register("join", "os.path:join")
    assert reg["join"] is __import__("os").path.join
    reg.register("bad", "faasrl.no_such_module:thing")
    with pytest.raises(ModuleNotFoundError):
        reg["bad"]


# -- the spec's Literals and unions come from the registries --------------------------------


def test_the_job_spec_and_the_settings_take_exactly_the_registered_names():
    fields = JobSpec.model_fields
    assert get_args(fields["algorithm"].annotation) == tuple(ALGORITHMS)
    assert get_args(fields["execution"].annotation) == tuple(WORKFLOWS)
    union = get_args(fields["controller"].annotation)
    assert union == tuple(CONTROLLERS.values())
    configs = get_args(fields["hyperparameters"].annotation)
    assert configs == tuple(m.Config for m in ALGORITHMS.values())
    assert get_args(Settings.model_fields["backend"].annotation) == tuple(BACKENDS)
    placements = get_args(FunctionSpec.model_fields["placement"].annotation)
    assert set(SERVICES) <= set(placements), "a service nobody can place a function on"
    actors = get_args(Placement.model_fields["actors"].annotation)
    assert set(SERVICES) <= set(get_args(actors[0])), "a service no job can place actors on"


def test_config_titles_are_unique():
    """Clients generated from the API's schema name their classes by these titles."""
    titles = [m.Config.model_json_schema()["title"] for m in ALGORITHMS.values()]
    titles += [spec.model_json_schema()["title"] for spec in CONTROLLERS.values()]
    assert len(titles) == len(set(titles)), titles


# -- algorithms ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_module_has_the_surface_of_its_executions(name: str):
    """Its executions' members, and its own model and optimizer (no handler builds them)."""
    assert algorithm_problems(ALGORITHMS[name], name) == []


def _toy_algorithm(**drop: Any) -> types.ModuleType:
    """A throwaway synchronous algorithm module: PPO's pieces under another name, less
    ``drop``'s keys."""
    ppo = ALGORITHMS["ppo"]

    class TOYConfig(ppo.Config):
        algorithm: typing.Literal["toy"] = "toy"  # type: ignore[assignment]

    module = types.ModuleType("toy")
    module.__dict__.update(
        NAME="toy", EXECUTIONS=("sync",), Config=TOYConfig, TOYConfig=TOYConfig,
        FAMILY_DEFAULTS={f: {"envs_per_actor": 1, "steps_per_actor": 8} for f in FAMILIES},
        initial_state=ppo.initial_state, batch_schema=ppo.batch_schema,
        actor_batch=ppo.actor_batch, update=ppo.update, loss=ppo.loss,
        make_model=lambda spec, cfg: None, make_optimizer=lambda model, cfg: None)
    for key in drop:
        delattr(module, key)
    return module


def test_adding_an_algorithm_is_one_module_and_one_line_checked_here():
    """Register a new module (the one line), and the conformance check names what it lacks."""
    ALGORITHMS.register("toy", _toy_algorithm())
    try:
        assert algorithm_problems(ALGORITHMS["toy"], "toy") == []
    finally:
        ALGORITHMS.unregister("toy")
    assert "toy" not in ALGORITHMS

    ALGORITHMS.register("toy", _toy_algorithm(loss=None))
    try:
        assert algorithm_problems(ALGORITHMS["toy"], "toy") == ["loss: missing (execution sync)"]
    finally:
        ALGORITHMS.unregister("toy")


def test_the_conformance_check_catches_a_wrong_signature_a_wrong_tag_and_an_execution():
    module = _toy_algorithm()
    module.update = lambda model, opt, batch, cfg: ({}, {})  # no keyword generator, lr, state
    module.EXECUTIONS = ("sync", "streaming")
    problems = algorithm_problems(module, "toy")
    assert "update: positional parameters ['model', 'opt', 'batch', 'cfg'], expected " \
           "['model', 'optimizer', 'batch', 'cfg'] first (execution sync)" in problems
    assert "update: no keyword parameter 'generator' (execution sync)" in problems
    assert any(p.startswith("EXECUTIONS ('sync', 'streaming')") for p in problems)
    assert algorithm_problems(module, "other")[0] == "NAME is 'toy', registered as 'other'"


# -- workflows -------------------------------------------------------------------------------


@pytest.mark.parametrize("execution", list(WORKFLOWS))
def test_every_workflow_is_made_from_a_job_run_and_names_its_algorithm_surface(execution: str):
    factory = WORKFLOWS[execution]
    assert isinstance(factory, type) and isinstance(factory, WorkflowFactory)
    assert list(inspect.signature(factory).parameters) == ["run"]
    assert Algorithm in factory.ALGORITHM_SURFACE.__mro__
    assert surface_problems(factory, Workflow) == []
    for name, method in protocol_members(Workflow).items():
        assert inspect.iscoroutinefunction(getattr(factory, name)), name
        assert inspect.iscoroutinefunction(method), name


def test_every_execution_has_an_algorithm_that_runs_it():
    assert set(WORKFLOWS) == {e for m in ALGORITHMS.values() for e in m.EXECUTIONS}


# -- controllers -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONTROLLERS))
def test_every_controller_is_a_strict_tagged_section_that_builds_its_controller(name: str):
    spec = CONTROLLERS[name]
    assert issubclass(spec, BaseModel) and spec.model_config.get("extra") == "forbid"
    tag = spec.model_fields["name"]
    assert get_args(tag.annotation) == (name,) and tag.default == name
    assert surface_problems(spec, ControllerEntry, skip={"name"}) == []  # a field: above
    required = {k for k, f in spec.model_fields.items() if f.is_required()}
    if not required:  # minions needs a saved scheduler: test_controllers builds it
        job = JobSpec.model_validate({"env_id": "CartPole-v1", "controller": {"name": name}})
        assert isinstance(job.controller, spec)
        assert isinstance(job.controller.build(schedulers=None), Controller)


# -- backends --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_container_backend_is_a_complete_backend_made_from_the_settings(name: str):
    pytest.importorskip({"docker": "docker", "ray": "ray"}.get(name, "faasrl"))
    cls = BACKENDS[name]
    assert isinstance(cls, type) and issubclass(cls, Backend) and not inspect.isabstract(cls)
    assert cls.name == name
    assert surface_problems(cls, BackendFactory) == []


@pytest.mark.parametrize("name", list(SERVICES))
def test_every_service_backend_is_complete_and_placed_by_its_name(name: str):
    cls = SERVICES[name]
    assert isinstance(cls, type) and issubclass(cls, ServiceBackend)
    assert not inspect.isabstract(cls) and cls.name == name
    assert surface_problems(cls, ServiceFactory) == []


def test_the_gateway_resolves_every_entry_without_torch():
    """The platform image has no torch: every registry's entries the gateway resolves
    (algorithms for their Configs, workflows at a job's start, controllers) import without it."""
    code = """if True:
        import sys
        sys.modules["torch"] = None  # importing it now raises ModuleNotFoundError
        from faasrl.algorithms import ALGORITHMS
        from faasrl.controllers import CONTROLLERS
        from faasrl.jobs.executions import WORKFLOWS
        for registry in (ALGORITHMS, WORKFLOWS, CONTROLLERS):
            print(len(list(registry.values())))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(r)) for r in (ALGORITHMS, WORKFLOWS, CONTROLLERS)]

