"""Every Redis key the platform or a job owns is spelled in ``faasrl.data.keys`` alone, and keeps
the bytes it had: stored jobs, records and functions must still read after a change."""

from __future__ import annotations

import ast
from pathlib import Path

from faasrl.data import keys

ROOT = Path(__file__).resolve().parents[2]
KEYS_MODULE = ROOT / "platform" / "faasrl" / "data" / "keys.py"


def test_every_key_keeps_its_bytes():
    job = "j1"
    assert [keys.job_record_key(job), keys.job_metrics_key(job), keys.job_pattern(job),
            keys.params_key(job, 3), keys.latest_key(job), keys.update_key(job),
            *keys.optimizer_keys(job), *keys.optimizer_keys(job, previous=True),
            keys.env_code_key(job), keys.trajectories_key(job), keys.rejected_key(job),
            keys.gradients_key(job), keys.learners_key(job), keys.learner_weights_key(job, 2),
            keys.parameter_state_key(job), keys.samples_key(job, "s"),
            keys.priorities_key(job, 4), keys.buffer_snapshot_key(job),
            keys.buffer_snapshot_key(job, 1), keys.served_key(job, 5),
            keys.served_pattern(job), keys.serving_password_key(job)] == [
        "faasrl:job:j1:record", "faasrl:job:j1:metrics", "faasrl:job:j1:*",
        "faasrl:job:j1:params:3", "faasrl:job:j1:params:latest", "faasrl:job:j1:update",
        "faasrl:job:j1:optimizer", "faasrl:job:j1:optimizer:version",
        "faasrl:job:j1:optimizer:previous", "faasrl:job:j1:optimizer:previous:version",
        "faasrl:job:j1:env:code", "faasrl:job:j1:trajectories", "faasrl:job:j1:rejected",
        "faasrl:job:j1:gradients", "faasrl:job:j1:learners", "faasrl:job:j1:learners:2:weights",
        "faasrl:job:j1:parameter:state", "faasrl:job:j1:samples:s",
        "faasrl:job:j1:priorities:4", "faasrl:job:j1:buffer:snapshot",
        "faasrl:job:j1:buffer:snapshot:1", "faasrl:job:j1:served:5", "faasrl:job:j1:served:*",
        "faasrl:serving:j1"]
    fn, sha = "lab-a.actor", "ab" * 32
    assert [keys.JOBS, keys.FUNCTIONS, keys.code_key(sha), keys.code_owners_key(sha),
            keys.ENV_DESCRIPTIONS, keys.NAMESPACES, keys.API_KEYS, keys.ASYNC_EVENTS,
            keys.dead_letters_key(fn), keys.dead_letter_order_key(fn), keys.spend_key("lab-a"),
            keys.versions_key(fn), keys.last_version_key(fn), keys.aliases_key(fn),
            keys.invocation_key("i1"), keys.invocations_index_key(fn),
            keys.invocation_logs_key("i1"), keys.RECORDS_ORDER, keys.RECORDS_BYTES] == [
        "faasrl:jobs", "faasrl:functions", f"faasrl:code:{sha}", f"faasrl:code-owners:{sha}",
        "faasrl:env-descriptions", "faasrl:namespaces", "faasrl:api-keys",
        "faasrl:async-events", "faasrl:dead-letters:lab-a.actor",
        "faasrl:dead-letters:lab-a.actor:order", "faasrl:spend:lab-a",
        "faasrl:versions:lab-a.actor", "faasrl:versions:lab-a.actor:last",
        "faasrl:aliases:lab-a.actor", "faasrl:invocation:i1",
        "faasrl:invocations:lab-a.actor", "faasrl:invocation-logs:i1",
        "faasrl:records:order", "faasrl:records:bytes"]


def _spelled_keys(path: Path) -> list[str]:
    """Where ``path`` spells a key itself: a string (or an f-string's head) that begins like
    one (``faasrl:<name>``), or a call of ``job_key``, which composes a job's key from parts."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.JoinedStr) and node.values:
            node = node.values[0]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("faasrl:") and node.value[7:8].isalpha():
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "job_key":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: job_key(...)")
    return found


def test_no_module_but_data_keys_spells_a_redis_key():
    sources = [p for folder in ("platform", "functions") for p in (ROOT / folder).rglob("*.py")
               if p != KEYS_MODULE]
    assert len(sources) > 100  # the scan sees the tree
    assert _spelled_keys(KEYS_MODULE)  # and would see a key spelled out
    assert [hit for p in sources for hit in _spelled_keys(p)] == []
