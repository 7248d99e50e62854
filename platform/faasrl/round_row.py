"""A round's metrics row: every column named once, with its group and what it means.

The job run (:meth:`faasrl.workflow.job.JobRun.close_round`) builds a :class:`RoundRow` from
the round its workflow closed; the row is stored flat, under the names below, as every row has
been (so older jobs' rows read the same). Whatever reads rows (controllers, the CLI, plots,
TensorBoard, the CSV, the dashboard through ``GET /v1/metrics/columns``, the docs' reference)
takes the names from here. Columns fall in groups, as CleanRL namespaces ``losses/...``: the
common ones (a round's progress and time), ``workflow`` (how the round ran), ``algo`` (the
algorithm's own figures: any column not named here is one), ``controller`` (the decision and
what the learner measured for it) and ``cost``; :func:`namespaced` gives a row those names.

This module imports nothing of faasrl's: the algorithms, controllers and workflows below and
above each other all read it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class Group(StrEnum):
    COMMON = "common"
    WORKFLOW = "workflow"
    ALGO = "algo"
    CONTROLLER = "controller"
    COST = "cost"


@dataclass(frozen=True)
class Column:
    name: str  # the stored row's key, the CSV's header, the TensorBoard tag
    group: Group
    description: str
    unit: str = ""
    host: bool = False  # it measures the host: a replay on a virtual clock differs there

    @property
    def namespaced(self) -> str:
        """``group/name`` (``?columns=v2``); a common column keeps its name."""
        return self.name if self.group is Group.COMMON else f"{self.group}/{self.name}"


COLUMNS: dict[str, Column] = {}


def _column(name: str, group: Group, description: str, unit: str = "", *,
            host: bool = False) -> str:
    if name in COLUMNS:
        raise ValueError(f"metrics column {name!r} named twice")
    COLUMNS[name] = Column(name, group, description, unit, host)
    return name


C, W, A, K, D = Group.COMMON, Group.WORKFLOW, Group.ALGO, Group.CONTROLLER, Group.COST

# ------------------------------------------------------------------ common: every job's rows
ROUND = _column("round", C, "the round's index, from 0")
ACTORS = _column("actors", C, "actor functions the controller gave the round (I_k)")
VERSION = _column("version", C, "the policy version when the round ended")
ENV_STEPS = _column("env_steps", C, "env steps the round's successful rollouts took", "steps")
TOTAL_ENV_STEPS = _column("total_env_steps", C, "env steps of the whole job so far: the rows' "
                          "x axis (TensorBoard's step)", "steps")
EPISODES = _column("episodes", C, "episodes that ended in the round")
MEAN_RETURN = _column("mean_return", C, "mean return of the round's episodes (empty: none "
                      "ended)")
MAX_RETURN = _column("max_return", C, "best return of the round's episodes")
RECENT_MEAN_RETURN = _column("recent_mean_return", C, "mean of the job's latest episode "
                             "returns (the stop rule's target_window): the training curve")
ROUND_S = _column("round_s", C, "the round's measured wall time", "s", host=True)
PARALLEL_ROUND_S = _column("parallel_round_s", C, "the round's time had no invocation waited "
                           "for a core (jobs/parallel.py)", "s", host=True)
ENV_RESTARTS = _column("env_restarts", C, "actor slots whose envs started afresh mid-job in "
                       "the round (a container died or was reclaimed)")
ENV_BACKEND = _column("env_backend", C, "what stepped the actors' envs (envpool, gymnasium)")
COLD_STARTS = _column("cold_starts", C, "the round's invocations that started a container",
                      host=True)
PAUSED_S = _column("paused_s", C, "time the round waited for Redis to come back", "s", host=True)
WALL_S = _column("wall_s", C, "the job's measured wall time so far", "s", host=True)
PARALLEL_WALL_S = _column("parallel_wall_s", C, "the job's modeled-parallel wall time so far",
                          "s", host=True)

# ------------------------------------------------------------------ workflow: how it ran
ACTOR_S_MAX = _column("actor_s_max", W, "the slowest successful rollout's run time", "s", host=True)
ACTOR_S_MEAN = _column("actor_s_mean", W, "mean run time of the successful rollouts", "s",
                       host=True)
ACTOR_S = _column("actor_s", W, "run time of every actor invocation, summed", "s", host=True)
QUEUE_S_MAX = _column("queue_s_max", W, "the longest any invocation queued", "s", host=True)
QUEUE_S = _column("queue_s", W, "per phase (actors, learner, parameter, buffer), seconds its "
                  "invocations waited for capacity", "s", host=True)
SHARE = _column("share", W, "the job's fair share: got (its part of recent usage) and fair "
                "(its entitlement)", host=True)
ACTOR_FAILURES = _column("actor_failures", W, "actor invocations that failed")
ACTOR_ERROR = _column("actor_error", W, "the first failed actor's error (sync)")
ERROR = _column("error", W, "the round's first error (async, offpolicy)")
ACTOR_ROLLOUTS = _column("actor_rollouts", W, "actor invocations in the round")
ACTOR_COLD_STARTS = _column("actor_cold_starts", W, "actor invocations that cold-started",
                            host=True)
ACTOR_PHASE_S = _column("actor_phase_s", W, "from the round's start to its last batch (sync)",
                        "s", host=True)
LEARNER_PHASE_S = _column("learner_phase_s", W, "from the last batch to the round's end (sync)",
                          "s", host=True)
LEARNER_S = _column("learner_s", W, "learner run time, summed over its invocations", "s", host=True)
LEARNER_DEVICE = _column("learner_device", W, "where the learner ran (cpu, cuda)")
LEARNER_CORES = _column("learner_cores", W, "cores the learner ran with: its own and those "
                        "lent from its idle actors (sync; offpolicy: the mean of its calls)",
                        host=True)
PREWARM_FORECAST = _column("prewarm_forecast", W, "actor containers pre-warmed for the next "
                           "round while the learner ran (sync)")
SAMPLES = _column("samples", W, "samples the learner trained on")
REJECTED = _column("rejected", W, "batches the learner refused (their reasons: "
                   "rejected_reasons)")
REJECTED_REASONS = _column("rejected_reasons", W, "why, for the first five refused batches")
TRANSFER_S = _column("transfer_s", W, "the learner's read of the batches plus the slowest "
                     "actor's write (sync)", "s", host=True)
CLOCK = _column("clock", W, "the parameter function's version clock at the round's end "
                "(async)")
LEARNERS_INVOKED = _column("learners_invoked", W, "learner invocations (async)")
LEARNERS_PEAK = _column("learners_peak", W, "most learners running at once (async)")
LEARNER_FAILURES = _column("learner_failures", W, "learner invocations that failed (async)")
PARAMETER_INVOCATIONS = _column("parameter_invocations", W, "parameter-function invocations "
                                "(async)")
PARAMETER_S = _column("parameter_s", W, "parameter-function run time, summed (async)", "s",
                      host=True)
GRADIENTS_AGGREGATED = _column("gradients_aggregated", W, "gradients the parameter function "
                               "applied (async)")
GRADIENTS_DROPPED = _column("gradients_dropped", W, "gradients it dropped as too stale (async)")
AGGREGATIONS = _column("aggregations", W, "aggregations in the round (async)")
AGGREGATION_REASONS = _column("aggregation_reasons", W, "what triggered each aggregation "
                              "(async)")
STALENESS_MEAN = _column("staleness_mean", W, "mean staleness of the aggregated gradients, in "
                         "versions (async)")
STALENESS_MAX = _column("staleness_max", W, "the stalest aggregated gradient (async)")
THRESHOLD = _column("threshold", W, "Stellaris' staleness threshold this round (async)")
NEXT_THRESHOLD = _column("next_threshold", W, "the threshold for the next round (async)")
SLICES = _column("slices", W, "learner slices the round's batches were cut into (async)")
POLICY_LAG = _column("policy_lag", W, "versions between a gradient's policy and the newest, "
                     "mean over the pushed gradients (async)")
LEARNER_STEPS = _column("learner_steps", W, "learner invocations of the whole job (offpolicy)")
GRADIENT_STEPS = _column("gradient_steps", W, "gradient steps in the round (offpolicy)")
TRANSITIONS = _column("transitions", W, "transitions the actors sent (offpolicy)")
BUFFER_SIZE = _column("buffer_size", W, "transitions in the replay memory (offpolicy)")
REPLAY_INSERTED = _column("replay_inserted", W, "transitions ever inserted (offpolicy)")
SAMPLED_PRIORITY_MEAN = _column("sampled_priority_mean", W, "mean priority of the sampled "
                                "transitions (offpolicy)")
EDGE_PRIORITY_MEAN = _column("edge_priority_mean", W, "mean priority the actors computed at "
                             "the edge (offpolicy)")
BYTES_TO_LEARNER = _column("bytes_to_learner", W, "bytes of samples sent to the learner "
                           "(offpolicy)", "B")
BYTES_FROM_ACTORS = _column("bytes_from_actors", W, "bytes of transitions the actors sent "
                            "(offpolicy)", "B")
BYTES_PER_TRANSITION = _column("bytes_per_transition", W, "stored bytes per transition "
                               "(offpolicy)", "B")
PRIORITIES_STALE = _column("priorities_stale", W, "priority updates that arrived after their "
                           "transitions were overwritten (offpolicy)")
LOST = _column("lost", W, "transitions lost with a replay memory that restarted (offpolicy)")
BUFFER_RESTORES = _column("buffer_restores", W, "replay memories restored from a snapshot "
                          "(offpolicy)")
SNAPSHOT_S = _column("snapshot_s", W, "time spent snapshotting the replay memory (offpolicy)",
                     "s", host=True)
LEARNER_IDLE_S = _column("learner_idle_s", W, "time the learner waited for samples "
                         "(offpolicy)", "s")
BUFFER_S = _column("buffer_s", W, "buffer-function run time, summed (offpolicy)", "s", host=True)
VIRTUAL_S = _column("virtual_s", W, "the round's length on the virtual clock (clock: "
                    "virtual)", "s")
VIRTUAL_ACTOR_S_MEAN = _column("virtual_actor_s_mean", W, "mean virtual duration of the actor "
                               "invocations that ended in the round (clock: virtual)", "s")
VIRTUAL_LEARNER_S = _column("virtual_learner_s", W, "virtual seconds of the learner "
                            "invocations that ended in the round (clock: virtual)", "s")

# ------------------------------------------------------------------ algo: named ones
LOSS = _column("loss", A, "the algorithm's total loss (PPO, IMPACT, DQN; SAC reports q_loss "
               "and actor_loss): MinionsRL's state reads it")
POLICY_KL = _column("policy_kl", A, "KL between the policy before and after the update (sync)")
ALPHA = _column("alpha", A, "SAC's entropy temperature α (the replay exponent is the spec's "
                "hyperparameters.alpha, never a column)")

# ------------------------------------------------------------------ controller
CONTROLLER = _column("controller", K, "the controller's decision: its explain() (wanted, "
                     "action, score, ...)")
CONTROLLER_S = _column("controller_s", K, "time the controller took to decide", "s", host=True)
HESSIAN_LAMBDA_MIN = _column("hessian_lambda_min", K, "the loss Hessian's smallest eigenvalue "
                             "(Nitro)")
HESSIAN_LAMBDA_MAX = _column("hessian_lambda_max", K, "its largest eigenvalue (Nitro)")
HESSIAN_RATIO = _column("hessian_ratio", K, "Nitro's convexity ratio of the two")
HESSIAN_S = _column("hessian_s", K, "time the learner spent on the Hessian", "s", host=True)
HESSIAN_SAMPLES = _column("hessian_samples", K, "samples the Hessian was estimated on")
HESSIAN_ITERATIONS = _column("hessian_iterations", K, "power iterations it took")
GNS = _column("gns", K, "the gradient noise scale (KungFu)")
GNS_GRAD_SQ = _column("gns_grad_sq", K, "|G|² of the noise-scale estimate")
GNS_TRACE = _column("gns_trace", K, "tr(Σ) of the noise-scale estimate")

# ------------------------------------------------------------------ cost (USD)
COST_ACTORS = _column("cost_actors", D, "the round's actors, billed as Lambda", "USD", host=True)
COST_LEARNER = _column("cost_learner", D, "the round's learner, as a share of a GPU VM", "USD",
                       host=True)
COST_PARAMETER = _column("cost_parameter", D, "the parameter function (async)", "USD", host=True)
COST_BUFFER = _column("cost_buffer", D, "the buffer function (offpolicy)", "USD", host=True)
COST_ROUND = _column("cost_round", D, "the round's functions together", "USD", host=True)
COST_TOTAL = _column("cost_total", D, "the job's serverless cost so far", "USD", host=True)
SERVERFUL_COST_TOTAL = _column("serverful_cost_total", D, "the same job on a VM for its whole "
                               "wall time", "USD", host=True)
PARALLEL_COST_ROUND = _column("parallel_cost_round", D, "the round's cost had no invocation "
                              "waited for a core", "USD", host=True)
PARALLEL_COST_TOTAL = _column("parallel_cost_total", D, "the job's modeled-parallel cost so far",
                              "USD", host=True)
VIRTUAL_COST_ROUND = _column("virtual_cost_round", D, "the round's invocations billed at their "
                             "virtual durations (clock: virtual)", "USD")
VIRTUAL_COST_ACTORS = _column("virtual_cost_actors", D, "the part of it the actors cost (clock: "
                              "virtual)", "USD")

del C, W, A, K, D


# The columns that measure the host, by nature different in a replay on a virtual clock.
HOST_COLUMNS = frozenset(c.name for c in COLUMNS.values() if c.host)


def column(name: str) -> Column:
    """A column by its stored name; one not named here is the algorithm's own figure."""
    return COLUMNS.get(name) or Column(name, Group.ALGO, "the algorithm's own figure")


def namespaced(row: dict[str, Any]) -> dict[str, Any]:
    """The row under ``group/name`` names (``?columns=v2``), in the same order."""
    return {column(k).namespaced: v for k, v in row.items()}


@dataclass
class RoundRow:
    """One round's row as the job run builds it: the common columns, what the workflow ran
    (its columns and the algorithm's, in the order it gave them), the decision and the costs.
    :meth:`flat` is what is stored: the names above, in this order."""

    round: int
    actors: int
    version: int
    env_steps: int
    total_env_steps: int
    episodes: int
    mean_return: float | None
    max_return: float | None
    recent_mean_return: float | None
    round_s: float
    parallel_round_s: float
    actor_s_max: float
    actor_s_mean: float | None
    cold_starts: int
    env_restarts: int
    env_backend: str | None
    queue_s_max: float
    queue_s: dict[str, float]
    actor_s: float
    share: dict[str, float]
    paused_s: float
    controller: dict[str, Any]
    controller_s: float
    columns: dict[str, Any]  # the workflow's and its algorithm's
    costs: dict[str, float]  # per function kind: cost_actors, cost_learner, ...
    cost_round: float
    cost_total: float
    serverful_cost_total: float
    parallel_cost_round: float
    parallel_cost_total: float
    wall_s: float
    parallel_wall_s: float

    def flat(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("columns", "costs"):
                out.update(value)
            else:
                out[f.name] = value
        return out
