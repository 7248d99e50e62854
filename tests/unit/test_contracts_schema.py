"""The function contracts' JSON Schemas in docs/contracts are the ones the contracts generate."""

from __future__ import annotations

import json

import jsonschema
from helpers import REPO

from faasrl.contracts import RolloutResult
from faasrl.contracts_schema import CONTRACTS, SUFFIX, modes, schemas
from faasrl.jobs import contract_args as calls
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord

REDIS = {"username": "faasrl-job-j1", "password": "secret"}

PUBLISHED = REPO / "docs" / "contracts"


def test_the_published_schemas_are_what_the_contracts_generate():
    """A contract changed without ``make docs-schemas`` fails here, naming the stale file."""
    made = schemas()
    published = {p.name: p.read_text(encoding="utf-8") for p in PUBLISHED.glob(f"*{SUFFIX}")}
    assert sorted(published) == sorted(made), "run: make docs-schemas"
    stale = [name for name, text in made.items() if published[name] != text]
    assert stale == [], f"stale (run: make docs-schemas): {stale}"


def test_every_mode_of_every_function_has_its_result_schema():
    for kind, (args, results) in CONTRACTS.items():
        assert modes(args) == list(results), kind


def test_a_schema_takes_what_the_driver_sends():
    """The args schema is of the wire format: a rollout's required keys, its mode's tag."""
    actor = json.loads(schemas()["actor.args" + SUFFIX])
    assert actor["discriminator"]["propertyName"] == "mode"
    rollout = actor["$defs"]["RolloutArgs"]
    assert rollout["additionalProperties"] is False
    assert {"job", "round", "slot", "version"} <= set(rollout["required"])


def test_what_the_driver_sends_validates_against_the_published_schemas():
    """A client written from the docs alone accepts what the platform sends, and a handler
    written from them answers what the platform reads."""
    rec = JobRecord(id="j1", created_at=0.0, version=3, policy={"obs_shape": [4]},
                    algorithm_state={"kl_coef": 0.2}, spec=JobSpec(env_id="CartPole-v1"))
    sent = {"actor": [calls.rollout_args(rec, REDIS, 2, 1, None),
                      calls.evaluate_args(rec, REDIS, "final")],
            "learner": [calls.init_args(rec, REDIS), calls.update_args(rec, REDIS, 2, [0, 1], {})]}
    for kind, args in sent.items():
        validator = _validator(f"{kind}.args")
        for a in args:
            validator.validate(json.loads(a.model_dump_json()))
    slotless = json.loads(sent["actor"][0].model_dump_json())
    del slotless["slot"]
    assert not _validator("actor.args").is_valid(slotless)
    result = RolloutResult(steps=64, version=3, entry="1-0", episodes=[(9.0, 9)],
                           weights_fetched=True, fetch_s=0.1, rollout_s=0.2, write_s=0.0,
                           bytes=100)
    _validator("actor.rollout.result").validate(json.loads(result.model_dump_json()))


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((PUBLISHED / f"{name}{SUFFIX}").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)
