"""Env seeds: training, target confirmations and the final (held-out) evaluation never share
one, for any job seed the spec allows, every evaluation plays its purpose's seeds, and the
record keeps the confirmation apart from the final evaluation."""

from __future__ import annotations

import pytest
from annotated_types import Le

from faasrl.jobs import contract_args as calls
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord
from faasrl.rl.seeds import EVALUATION_BASE, EVALUATION_BLOCK, evaluation_seeds, training_seed
from faasrl.workflow.job import RESTORED_FIELDS

MAX_JOB_SEED = 2**31 - 1
JOB_SEEDS = (0, 1, 2, 7, 12_345, MAX_JOB_SEED - 1, MAX_JOB_SEED)
REDIS = {"username": "faasrl-job-j1", "password": "secret"}


def _training(job_seed: int, slots: int, rounds: int, envs: int) -> set[int]:
    """Every env seed a job's actors build envs with (a vector env: ``seed + i`` per env)."""
    return {training_seed(job_seed, slot, round_) + i
            for slot in range(slots) for round_ in range(rounds) for i in range(envs)}


def _evaluations(job_seed: int, episodes: int) -> tuple[set[int], set[int]]:
    return (set(evaluation_seeds(job_seed, "confirmation", episodes)),
            set(evaluation_seeds(job_seed, "final", episodes)))


@pytest.mark.parametrize("episodes", [1, 20, 1000])
def test_confirmation_final_and_training_seeds_are_disjoint(episodes: int):
    everything: set[int] = set()
    for job_seed in JOB_SEEDS:
        confirmation, final = _evaluations(job_seed, episodes)
        assert len(confirmation) == len(final) == episodes
        assert not confirmation & final
        assert not (confirmation | final) & _training(job_seed, slots=8, rounds=50, envs=8)
        assert not (confirmation | final) & everything  # nor another job seed's evaluations
        everything |= confirmation | final


def test_evaluation_seeds_sit_above_every_training_seed_and_below_2_to_the_53():
    """Far slots and rounds of the largest job seed still train below the evaluations, and the
    largest evaluation seed is exact in a JSON double."""
    assert training_seed(MAX_JOB_SEED, 10_000, 10**9) + 10_000 < EVALUATION_BASE
    top = evaluation_seeds(MAX_JOB_SEED, "final", EVALUATION_BLOCK)
    assert top[-1] < 2**53
    assert min(evaluation_seeds(0, "confirmation", 1)) >= EVALUATION_BASE


def test_a_purpose_holds_every_evaluation_the_spec_allows():
    (bound,) = [m.le for m in JobSpec.model_fields["evaluation_episodes"].metadata
                if isinstance(m, Le)]
    assert bound <= EVALUATION_BLOCK
    with pytest.raises(ValueError, match="seeds"):
        evaluation_seeds(1, "final", EVALUATION_BLOCK + 1)


def test_confirmations_reuse_one_set_and_the_final_evaluation_plays_the_held_out_one():
    rec = JobRecord(id="j1", created_at=0.0, version=3, policy={"obs_shape": [4]},
                    spec=JobSpec.model_validate({"env_id": "CartPole-v1", "seed": 5,
                                                 "evaluation_episodes": 20}))
    confirm = calls.evaluate_args(rec, REDIS, "confirmation")
    final = calls.evaluate_args(rec, REDIS, "final")
    assert confirm == calls.evaluate_args(rec, REDIS, "confirmation")
    assert range(confirm.seed, confirm.seed + confirm.episodes) == \
        evaluation_seeds(5, "confirmation", 20)
    assert range(final.seed, final.seed + final.episodes) == evaluation_seeds(5, "final", 20)


def test_records_keep_the_confirmation_and_read_evaluations_stored_before_seeds_were_named():
    """The record is saved as JSON (and checkpointed): a restarted gateway reads the
    confirmation back, and a resume from disk restores it with the version it confirmed."""
    ev = {"version": 3, "episodes": 1, "mean": 9.0, "std": 0.0, "min": 9.0, "max": 9.0,
          "returns": [9.0]}
    old = JobRecord(id="j1", created_at=0.0, spec=JobSpec(env_id="CartPole-v1"), evaluation=ev)
    assert old.evaluation.first_seed is None and old.confirmation is None
    rec = old.model_copy(update={"confirmation": old.evaluation.model_copy(
        update={"first_seed": EVALUATION_BASE})})
    assert JobRecord.model_validate_json(rec.model_dump_json()).confirmation == rec.confirmation
    assert "confirmation" in RESTORED_FIELDS
