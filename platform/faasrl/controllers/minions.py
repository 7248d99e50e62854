"""MinionsRL: a small PPO agent (the scheduler) picks each round's actor count, and its variants.

State (8 numbers, the paper's order), before round k:
  (k, L_{k-1}, R̄_{k-1}, D^KL_k, P^l_{k-1}, mean P^a_{k-1}, P_{k-1}, b_k)
= (round, the learner's loss, the mean episode return of the last round's actors (the latest one
  known when no episode ended), the KL between the last two policies, the learner's time, the
  mean actor time, the round's time, the remaining budget). Two choices of ours: R̄ is divided by
  |J| and b_k by B when the job has them, so one scheduler fits tasks with different reward
  scales and budgets (the paper fine-tunes schedulers across tasks); and the scheduler normalises
  the state with running statistics learned in training, frozen at run time.

Action: I_k ∈ {1..I_max}, a categorical over I_max logits. Reward of round k: -β·P_k, or with the
cost-weighted variant -β·P_k - η·C_k. The final round adds min(0, max_k R̄_k - J)/|J| unless the
target was reached within the budget: the paper's term turns positive when the training returns
passed J but the job ended otherwise; the guard keeps it a penalty, and dividing by |J| keeps it
O(1) next to the time term.

At run time the scheduler is a numpy forward pass of the saved weights (the gateway has no
torch); its training (``faasrl.scheduler_training.train``) uses the PPO of ``faasrl.rl``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from faasrl import round_row as rr
from faasrl.controllers.base import Controller, RoundContext, last_valid

# The columns s_k is made of, in its order between the round and the budget left.
STATE_READS = (rr.LOSS, rr.MEAN_RETURN, rr.POLICY_KL, rr.LEARNER_S, rr.ACTOR_S_MEAN, rr.ROUND_S)
FEATURES = (rr.ROUND, *STATE_READS, "budget_left")
# The saved scheduler's output layer (the actor head of faasrl.rl's ActorCritic, two hidden
# layers: Linear, tanh, Linear, tanh, Linear): one logit per actor count, 1..I_max.
OUTPUT_WEIGHT, OUTPUT_BIAS = "actor.4.weight", "actor.4.bias"


def scheduler_i_max(weights: Mapping[str, Any]) -> int:
    """I_max of a saved scheduler: the most actors it picks (its output layer's width)."""
    return int(weights[OUTPUT_BIAS].shape[0])


def scheduler_state(ctx: RoundContext) -> list[float]:
    """s_k from the job's rows so far (all zero but k and b_k before the first round)."""
    last = ctx.history[-1] if ctx.history else {}
    ret = last_valid(ctx.history, rr.MEAN_RETURN) or 0.0
    if ctx.target_reward:
        ret /= abs(ctx.target_reward)
    budget = 1.0
    if ctx.budget_usd and ctx.budget_left_usd is not None:
        budget = ctx.budget_left_usd / ctx.budget_usd
    return [float(ctx.round), float(last.get(rr.LOSS) or 0.0), float(ret),
            float(last.get(rr.POLICY_KL) or 0.0), float(last.get(rr.LEARNER_S) or 0.0),
            float(last.get(rr.ACTOR_S_MEAN) or 0.0), float(last.get(rr.ROUND_S) or 0.0),
            float(budget)]


def round_reward(row: dict[str, Any], beta: float, eta: float = 0.0) -> float:
    """r_k = -β·P_k - η·C_k (η = 0: the paper's time-only reward)."""
    return -beta * float(row[rr.ROUND_S]) - eta * float(row[rr.COST_ROUND])


def terminal_penalty(max_mean_return: float | None, target: float | None, reached: bool,
                     budget_left: float | None) -> float:
    """The final round's extra term: min(0, max_k R̄_k - J)/|J| unless the job reached J within
    its budget; 0 without a target. No return at all counts as max_k R̄_k = 0."""
    if target is None or (reached and (budget_left is None or budget_left >= 0)):
        return 0.0
    gap = (max_mean_return or 0.0) - target
    return min(0.0, gap) / (abs(target) or 1.0)


class SchedulerPolicy:
    """The scheduler's policy network, forward in numpy (float64) from saved weights."""

    def __init__(self, weights: dict[str, np.ndarray]):
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.i_max = scheduler_i_max(self.w)

    def logits(self, state: list[float]) -> np.ndarray:
        x = np.asarray(state, dtype=np.float64)
        x = np.clip((x - self.w["obs_mean"]) / np.sqrt(self.w["obs_var"] + 1e-8), -10.0, 10.0)
        for i in (0, 2):
            x = np.tanh(self.w[f"actor.{i}.weight"] @ x + self.w[f"actor.{i}.bias"])
        return self.w[OUTPUT_WEIGHT] @ x + self.w[OUTPUT_BIAS]


class Minions(Controller):
    """The learned scheduler: the most likely I_k, or a sample from the policy (training)."""

    READS = STATE_READS

    def __init__(self, weights: dict[str, np.ndarray], *, sample: bool = False):
        self.policy = SchedulerPolicy(weights)
        self.sample = sample
        self._last: dict[str, Any] = {}

    def actors(self, ctx: RoundContext) -> int:
        state = scheduler_state(ctx)
        logits = self.policy.logits(state)
        logp = logits - logits.max()
        logp = logp - math.log(np.exp(logp).sum())
        if self.sample:
            rng = np.random.default_rng([ctx.seed, ctx.round])
            index = int(rng.choice(len(logp), p=np.exp(logp) / np.exp(logp).sum()))
        else:
            index = int(np.argmax(logp))
        self._last = {"state": state, "action": index + 1, "logprob": float(logp[index])}
        return index + 1

    def forecast(self, ctx: RoundContext) -> int:
        return self.policy.i_max

    def explain(self) -> dict[str, Any]:
        return dict(self._last)


class MinionsAdapt(Controller):
    """I_k = clip(round(Ĵ_k / J · I_max), 1, I_max), Ĵ_k the mean of the last n valid round
    mean returns (0 before any); round half up. Needs J > 0."""

    READS = (rr.MEAN_RETURN,)

    def __init__(self, *, max_actors: int = 32, window: int = 5):
        self.max_actors, self.window = max_actors, window

    def actors(self, ctx: RoundContext) -> int:
        target = ctx.target_reward
        if target is None or target <= 0:
            raise ValueError("minions-adapt needs a positive stop.target_reward")
        recent = [float(r[rr.MEAN_RETURN]) for r in ctx.history
                  if r.get(rr.MEAN_RETURN) is not None][-self.window:]
        estimate = sum(recent) / len(recent) if recent else 0.0
        return max(1, min(self.max_actors, math.floor(estimate / target * self.max_actors + 0.5)))
