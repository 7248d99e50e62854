"""Nitro's overhead: the surrogate-Hessian request against the learner's PPO update, same process.

Per env, with its family's PPO defaults (envs per actor x steps per actor, epochs, minibatches)
and a batch of real rollouts for I actors, interleaved repeats of: the PPO update on the batch
(what the learner does every round), then Nitro's Hessian request on the updated policy
(``surrogate_hessian_extremes``) at Nitro's default subset (1,024 rows, 20 Lanczos steps) and at
bench/controllers.py's, each with the R-operator products of ``rl/hessian.py`` and with the
baseline: autograd's double backward on a retained graph (Pearlmutter's trick, what
``rl/hessian.py`` used before), whose eigenvalues must be the same. Then the two
Hessian-vector products alone on the request's subset. Medians; one torch thread, as in the
learner. The overhead is the request's time over the update's: a lower bound on the round's
share, since a round also waits for its actors.

    python bench/nitro_overhead.py [--quick] [--repeats 7] [--out bench/results/nitro_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from rich.console import Console
from rich.table import Table

from faasrl.algorithms import ppo
from faasrl.rl import hessian
from faasrl.rl.envs import env_family, make_vec_env
from faasrl.rl.policy import ActorCritic, policy_spec_for
from faasrl.rl.rollout import Rollout

# env id -> (actor counts I per round, bench/controllers.py's Hessian (samples, iterations))
ENVS: dict[str, tuple[tuple[int, ...], tuple[int, int]]] = {
    "CartPole-v1": ((1, 8, 64), (512, 10)),
    "Hopper-v5": ((1,), (1024, 10)),
}
NITRO_DEFAULT = (1024, 20)
ROLLOUT_ACTORS = 8  # more actors reuse these rows (an update's time does not depend on them)

Hvp = Callable[[torch.Tensor], torch.Tensor]


def autograd_hvp(model: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                 advantages: torch.Tensor) -> tuple[Hvp, int]:
    """The baseline: H·v = ∇(∇L·v) by autograd's double backward on a retained graph."""
    logprob = model.distribution(obs).log_prob(actions)
    logprob = logprob.sum(-1) if logprob.dim() > 1 else logprob
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad((logprob * advantages).mean(), params, create_graph=True,
                                allow_unused=True)
    used = [(p, g) for p, g in zip(params, grads, strict=True) if g is not None]
    flat = torch.cat([g.reshape(-1) for _, g in used])

    def hvp(v: torch.Tensor) -> torch.Tensor:
        hv = torch.autograd.grad(flat, [p for p, _ in used], v.to(flat.dtype), retain_graph=True)
        return torch.cat([h.reshape(-1) for h in hv])

    return hvp, flat.numel()


PRODUCTS: dict[str, Callable[..., tuple[Hvp, int]]] = {
    "r-op": hessian.surrogate_hvp, "autograd": autograd_hvp}


def rollout_batch(env_id: str, cfg: ppo.Config, envs: int, steps: int) -> dict[str, torch.Tensor]:
    """ROLLOUT_ACTORS actors' rows of one round, from a fresh policy, time-major."""
    policy = ActorCritic(policy_spec_for(env_id))
    rollout = Rollout(make_vec_env(env_id, envs * ROLLOUT_ACTORS, seed=0), policy,
                      num_steps=steps, gamma=cfg.gamma, seed=0)
    batch = ppo.actor_batch(rollout.collect()[0], cfg)
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def rows_for(batch: dict[str, torch.Tensor], rows: int) -> dict[str, torch.Tensor]:
    reps = -(-rows // batch["obs"].shape[0])
    return {k: v.repeat(reps, *[1] * (v.dim() - 1))[:rows] for k, v in batch.items()}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def request(model: ActorCritic, batch: dict[str, torch.Tensor], product: str, samples: int,
            iterations: int, seed: int) -> tuple[float, dict[str, Any]]:
    """The learner's Hessian request, its products swapped for ``product``'s."""
    with mock.patch.object(hessian, "surrogate_hvp", PRODUCTS[product]):
        return timed(lambda: hessian.surrogate_hessian_extremes(
            model, batch, samples=samples, iterations=iterations,
            generator=torch.Generator().manual_seed(seed)))


def product_times(model: ActorCritic, batch: dict[str, torch.Tensor], samples: int,
                  calls: int) -> dict[str, float]:
    """Seconds per Hessian-vector product on ``samples`` rows, the two kinds interleaved."""
    rows = {k: v[:samples] for k, v in batch.items()}
    hvps = {name: make(model, rows["obs"], rows["actions"], rows["advantages"])
            for name, make in PRODUCTS.items()}
    v = torch.randn(hvps["r-op"][1], dtype=torch.float64, generator=torch.Generator())
    times: dict[str, list[float]] = {name: [] for name in hvps}
    for _ in range(calls):
        for name, (hvp, _) in hvps.items():
            times[name].append(timed(lambda hvp=hvp: hvp(v))[0])
    return {name: statistics.median(t) for name, t in times.items()}


def one_round(model: ActorCritic, optimizer: torch.optim.Optimizer, cfg: ppo.Config,
              batch: dict[str, torch.Tensor], configs: list[tuple[int, int]], seed: int
              ) -> tuple[float, dict[tuple[int, int, str], tuple[float, dict[str, Any]]]]:
    """The update's seconds, then each request's (seconds, result) on the updated policy, the
    two kinds of product in an order that alternates with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    update_s, _ = timed(lambda: ppo.update(model, optimizer, batch, cfg, generator=generator))
    order = list(PRODUCTS) if seed % 2 else list(PRODUCTS)[::-1]
    return update_s, {(samples, iterations, product):
                      request(model, batch, product, samples, iterations, seed)
                      for samples, iterations in configs for product in order}


def measure_env(env_id: str, actors: tuple[int, ...], configs: list[tuple[int, int]],
                repeats: int, calls: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per (I, request config): update and request medians; per subset size: product medians."""
    defaults = ppo.FAMILY_DEFAULTS[env_family(env_id)]
    cfg = ppo.Config(**defaults["hyperparameters"])
    rows_per_actor = defaults["envs_per_actor"] * defaults["steps_per_actor"]
    base = rollout_batch(env_id, cfg, defaults["envs_per_actor"], defaults["steps_per_actor"])
    torch.manual_seed(0)
    model = ActorCritic(policy_spec_for(env_id))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    sizes = sorted({s for s, _ in configs})
    updates: dict[int, list[float]] = {i: [] for i in actors}
    requests: dict[tuple[int, int, int, str], list[tuple[float, dict[str, Any]]]] = {}
    products: dict[int, list[dict[str, float]]] = {s: [] for s in sizes}
    for rep in range(repeats + 1):  # the first is a warm-up
        for i in actors:
            update_s, out = one_round(model, optimizer, cfg, rows_for(base, i * rows_per_actor),
                                      configs, rep)
            if rep:
                updates[i].append(update_s)
                for key, run in out.items():
                    requests.setdefault((i, *key), []).append(run)
        for s in sizes if rep else ():
            products[s].append(product_times(model, base, s, calls))
    return _summaries(env_id, rows_per_actor, updates, requests), [
        {"env_id": env_id, "samples": s,
         **{f"{name}_ms": 1e3 * statistics.median(p[name] for p in products[s])
            for name in PRODUCTS}} for s in sizes]


def _summaries(env_id: str, rows_per_actor: int, updates: dict[int, list[float]],
               requests: dict[tuple[int, int, int, str], list[tuple[float, dict[str, Any]]]]
               ) -> list[dict[str, Any]]:
    out = []
    for (i, samples, iterations, product), runs in requests.items():
        if product != "r-op":
            continue
        baseline = requests[(i, samples, iterations, "autograd")]
        update = statistics.median(updates[i])
        new = statistics.median(t for t, _ in runs)
        old = statistics.median(t for t, _ in baseline)
        eig_diff = max(abs(a[k] - b[k]) / abs(b[k]) for (_, a), (_, b) in zip(runs, baseline,
                                                                                strict=True)
                       for k in ("lambda_min", "lambda_max"))
        out.append({"env_id": env_id, "actors": i, "rows": i * rows_per_actor,
                    "samples": samples, "iterations": iterations, "update_ms": 1e3 * update,
                    "request_ms": 1e3 * new, "autograd_request_ms": 1e3 * old,
                    "overhead_pct": 100 * new / update, "autograd_overhead_pct": 100 * old / update,
                    "eigenvalue_max_rel_diff": eig_diff})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="CartPole, one actor, bench/controllers.py's request, 2 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/results/nitro_overhead.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    envs = {"CartPole-v1": ((1,), ENVS["CartPole-v1"][1])} if args.quick else ENVS
    repeats, calls = (2, 5) if args.quick else (args.repeats, 20)
    rounds, products = [], []
    for env_id, (actors, bench_config) in envs.items():
        configs = [bench_config] if args.quick else [NITRO_DEFAULT, bench_config]
        r, p = measure_env(env_id, actors, configs, repeats, calls)
        rounds += r
        products += p
    console = Console(width=150)
    table = Table("env", "I", "rows", "samples x steps", "update ms", "request ms",
                  "autograd ms", "speed-up", "overhead %", "autograd %", "eig. rel. diff",
                  title="Nitro's Hessian request against the PPO update (medians)")
    for r in rounds:
        table.add_row(r["env_id"], str(r["actors"]), str(r["rows"]),
                      f"{r['samples']} x {r['iterations']}", f"{r['update_ms']:.1f}",
                      f"{r['request_ms']:.1f}", f"{r['autograd_request_ms']:.1f}",
                      f"{r['autograd_request_ms'] / r['request_ms']:.2f}x",
                      f"{r['overhead_pct']:.1f}", f"{r['autograd_overhead_pct']:.1f}",
                      f"{r['eigenvalue_max_rel_diff']:.1e}")
    console.print(table)
    hvp_table = Table("env", "samples", "r-op ms", "autograd ms", "speed-up",
                      title="one Hessian-vector product (medians)")
    for p in products:
        hvp_table.add_row(p["env_id"], str(p["samples"]), f"{p['r-op_ms']:.3f}",
                          f"{p['autograd_ms']:.3f}", f"{p['autograd_ms'] / p['r-op_ms']:.2f}x")
    console.print(hvp_table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"requests": rounds, "products": products,
                                    "repeats": repeats, "torch": torch.__version__}, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
