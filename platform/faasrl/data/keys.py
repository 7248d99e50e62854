"""Every key a job owns lives under ``faasrl:job:<id>:``, so deleting a job deletes its data."""

from __future__ import annotations

import re

JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def job_prefix(job_id: str) -> str:
    if not JOB_ID.match(job_id):
        raise ValueError(f"job id {job_id!r}: letters, digits, '-' and '_' only")
    return f"faasrl:job:{job_id}:"


def job_key(job_id: str, *parts: object) -> str:
    return job_prefix(job_id) + ":".join(str(p) for p in parts)


def job_pattern(job_id: str) -> str:
    """Every key the job owns: what deleting it scans for, and all its Redis user may touch."""
    return job_prefix(job_id) + "*"


# Jobs (jobs/store.py): a sorted set of every job id by when it was created, and per job its
# record (JSON) and its rounds' rows (a list of JSON objects).
JOBS = "faasrl:jobs"


def job_record_key(job_id: str) -> str:
    return job_key(job_id, "record")


def job_metrics_key(job_id: str) -> str:
    return job_key(job_id, "metrics")


# Policy weights and the learner's optimizer: written by the learner (ParameterStore), read by
# actors, restored from disk and served by the gateway.
def params_key(job_id: str, version: int) -> str:
    return job_key(job_id, "params", version)


def latest_key(job_id: str) -> str:
    return job_key(job_id, "params", "latest")


def update_key(job_id: str) -> str:
    """The learner's result for the newest version it published (JSON): a learner invoked
    again for an update it already published answers with it instead of training twice."""
    return job_key(job_id, "update")


def optimizer_keys(job_id: str, previous: bool = False) -> tuple[str, str]:
    """(the optimizer state, the weights version it goes with); ``previous``: the state the
    newest publish replaced, kept so that a published update can be rolled back."""
    if previous:
        return job_key(job_id, "optimizer", "previous"), job_key(job_id, "optimizer",
                                                                 "previous", "version")
    return job_key(job_id, "optimizer"), job_key(job_id, "optimizer", "version")


# A job's environment as code (faasrl.env_code): the archive's bytes, which the job driver sets
# before the first round and every function building the job's env reads once per container.
def env_code_key(job_id: str) -> str:
    return job_key(job_id, "env", "code")


# Trajectories: actors append batches, learners consume them (TrajectoryStream).
def trajectories_key(job_id: str) -> str:
    return job_key(job_id, "trajectories")


def rejected_key(job_id: str) -> str:
    """A list: why each batch a learner would not train on was rejected (JSON)."""
    return job_key(job_id, "rejected")


# Asynchronous training: learners push gradients to a stream, register the policy they hold,
# and the parameter function keeps its aggregation state next to the weights.
def gradients_key(job_id: str) -> str:
    return job_key(job_id, "gradients")


def learners_key(job_id: str) -> str:
    """A hash: learner slot -> the clock (weights version) it computes on."""
    return job_key(job_id, "learners")


def learner_weights_key(job_id: str, slot: int) -> str:
    return job_key(job_id, "learners", slot, "weights")


def parameter_state_key(job_id: str) -> str:
    return job_key(job_id, "parameter", "state")


# Off-policy training: the buffer function's sampled batches and snapshot, the learner's new
# priorities (one key per published version, so a late one never overwrites an unread one).
def samples_key(job_id: str, sample_id: str) -> str:
    return job_key(job_id, "samples", sample_id)


def priorities_key(job_id: str, version: int) -> str:
    return job_key(job_id, "priorities", version)


def buffer_snapshot_key(job_id: str, part: int | None = None) -> str:
    """The replay memory's snapshot: a manifest (JSON) and its blob's parts."""
    return job_key(job_id, "buffer", "snapshot", *(() if part is None else (part,)))


# Served policies (faasrl.gateway.services.serving): the versions a policy function serves,
# copied out of the newest-few rotation so a pinned version outlives training; the job's serving
# ACL user may read these and nothing else. Its password is kept outside the job's prefix.
def served_key(job_id: str, version: int) -> str:
    return job_key(job_id, "served", version)


def served_pattern(job_id: str) -> str:
    """Every served copy of the job's weights: the serving user's key pattern."""
    return job_key(job_id, "served", "*")


SERVING_PASSWORDS = "faasrl:serving:"  # + a job id: its serving user's password


def serving_password_key(job_id: str) -> str:
    job_prefix(job_id)  # the id's check
    return SERVING_PASSWORDS + job_id


# Functions (invoker/registry.py): a hash, qualified name -> manifest (JSON); uploaded code
# archives by their sha256, each one string.
FUNCTIONS = "faasrl:functions"
CODE_ARCHIVES = "faasrl:code:"  # + an archive's sha256


def code_key(sha256: str) -> str:
    return CODE_ARCHIVES + sha256


# Env descriptions (jobs/env_probe.py): a hash, a probe's digest of what a description depends
# on -> the EnvDescription (JSON), kept for the next submit of the same env and the next gateway.
ENV_DESCRIPTIONS = "faasrl:env-descriptions"


# Tenancy (faasrl.gateway.keys): namespaces and their quotas, and API keys (hashed), one hash each.
NAMESPACES = "faasrl:namespaces"
API_KEYS = "faasrl:api-keys"


# Asynchronous invocations (faasrl.gateway.async_events): those not finished yet (a hash, event id
# -> the event as JSON: resumed at the next start), and per function (its qualified name) the
# dead letters, a hash (id -> JSON) and their order (a sorted set scored by when each failed).
ASYNC_EVENTS = "faasrl:async-events"


def dead_letters_key(function: str) -> str:
    return f"faasrl:dead-letters:{function}"


def dead_letter_order_key(function: str) -> str:
    return f"faasrl:dead-letters:{function}:order"

# Invocation records (invoker/records.py): one string per record, per function the ids of its
# finished ones (a list, newest first), and the order and cost of every record in Redis, which
# retention reads to drop the oldest. Its Lua script builds keys from the prefixes itself.
INVOCATION_RECORDS = "faasrl:invocation:"  # + an invocation id: its record
FUNCTION_INVOCATIONS = "faasrl:invocations:"  # + a function's qualified name: its index
RECORDS_ORDER = "faasrl:records:order"  # every record in Redis, oldest first: "<epoch s> <fn> <id>"
RECORDS_BYTES = "faasrl:records:bytes"  # what they cost in Redis (records.RECORD_OVERHEAD)
# What an invocation wrote (print, logging, warnings: runtime/logs.py), beside its record and
# dropped with it.
INVOCATION_LOGS = "faasrl:invocation-logs:"  # + an invocation id


def invocation_key(invocation_id: str) -> str:
    return INVOCATION_RECORDS + invocation_id


def invocations_index_key(function: str) -> str:
    return FUNCTION_INVOCATIONS + function


def invocation_logs_key(invocation_id: str) -> str:
    return INVOCATION_LOGS + invocation_id



def code_owners_key(sha256: str) -> str:
    """A set: the namespaces that uploaded the code archive ``sha256`` (none: it was stored
    before namespaces, and is ``default``'s)."""
    return f"faasrl:code-owners:{sha256}"


def spend_key(namespace: str) -> str:
    """What a namespace's jobs spent (the cost model's USD per round), scored by when: its
    daily spend quota looks back 24 h (``jobs/admission.py``)."""
    return f"faasrl:spend:{namespace}"


# A function's published versions (invoker/versions.py), per qualified function name: a hash
# (version number -> the version as JSON), the last number handed out (never reused, as on
# Lambda, even once that version is deleted) and a hash of its aliases (name -> JSON).
def versions_key(function: str) -> str:
    return f"faasrl:versions:{function}"


def last_version_key(function: str) -> str:
    return f"faasrl:versions:{function}:last"


def aliases_key(function: str) -> str:
    return f"faasrl:aliases:{function}"
