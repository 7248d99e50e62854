"""Stellaris's truncation forms, the aggregation rules' weights, thresholds and liveness."""

from __future__ import annotations

import math

import pytest
import torch

from faasrl.rl.aggregation import SSP, Async, SoftSync, Stellaris, build_rule, combine
from faasrl.rl.truncation import truncated_ratio


def _ratio(own: float, peers: list[float], mode: str, rho: float) -> tuple[float, float]:
    """(r, dr/d log r_own) for one sample."""
    own_log = torch.tensor([math.log(own)], requires_grad=True)
    peer_logs = [torch.tensor([math.log(p)], requires_grad=True) for p in peers]
    r = truncated_ratio(own_log, peer_logs, mode, rho)
    r.sum().backward()
    assert all(p.grad is None for p in peer_logs)  # peers are never differentiated
    return r.item(), own_log.grad.item()


@pytest.mark.parametrize(("own", "peers", "mode", "rho", "r", "grad"), [
    (1.5, [1.2], "off", 1.0, 1.5, 1.5),         # plain ratio, d r / d log r = r
    (1.5, [1.2], "paper", 1.0, 1.0, 0.0),       # min(1.5, min(1.5, 1.2, ρ=1)) = 1, cut
    (0.8, [0.9], "paper", 1.0, 0.8, 0.8),       # own is the lowest and below ρ: kept
    (0.9, [0.5], "paper", 1.0, 0.5, 0.0),       # a peer's lower ratio caps it
    (1.5, [1.2], "paper", 2.0, 1.2, 0.0),       # ρ above: the peer still caps
    (1.5, [1.2], "artifact", 1.0, 1.2, 0.0),    # min(1.5, max(1.2, 1)) = 1.2
    (0.8, [0.5], "artifact", 1.0, 0.8, 0.8),    # max(0.5, 1) = 1 > own: kept
    (1.5, [2.0], "artifact", 1.0, 1.5, 1.5),    # max(1.5, 1) = own: kept
    (1.5, [], "paper", 1.0, 1.0, 0.0),          # one learner: R' = min(r, ρ)
])
def test_truncation_forms(own, peers, mode, rho, r, grad):
    got_r, got_grad = _ratio(own, peers, mode, rho)
    assert got_r == pytest.approx(r)
    assert got_grad == pytest.approx(grad)


def test_unknown_truncation_is_an_error():
    with pytest.raises(ValueError, match="truncation"):
        truncated_ratio(torch.zeros(1), [], "sometimes", 1.0)


def test_stellaris_bootstraps_delta_max_then_decays_the_threshold():
    rule = Stellaris(decay=0.9, root=3, delta_max="max")
    assert rule.threshold() is None
    assert rule.ready([5, 7], learners=2) == "bootstrap"  # round 0: no threshold
    rule.aggregated([0, 1])
    rule.aggregated([3])
    rule.end_round()
    assert rule.delta_max == 3 and rule.round == 1
    assert rule.threshold() == pytest.approx(3 * 0.9)
    rule.end_round()
    assert rule.threshold() == pytest.approx(3 * 0.9**2)
    # The authors' bootstrap: int(mean) + 1 = int(4/3) + 1 = 2.
    mean = Stellaris(delta_max="mean")
    mean.aggregated([0, 1, 3])
    mean.end_round()
    assert mean.delta_max == 2


def test_stellaris_waits_above_the_threshold_until_fresher_gradients_or_liveness():
    rule = Stellaris(decay=0.5)
    rule.load_state_dict({"round": 1, "delta_max": 2.0})  # β_1 = 1
    assert rule.ready([1], learners=4) == "threshold"  # ≤, not <
    assert rule.ready([3], learners=4) is None
    assert rule.ready([3, 0], learners=4) is None  # mean 1.5
    assert rule.ready([3, 0, 0], learners=4) == "threshold"  # mean 1.0
    # Gradients stop coming: a full queue is aggregated however stale it is.
    assert rule.ready([9, 9, 9, 9], learners=4) == "liveness"
    assert rule.state_dict() == {"round": 1, "delta_max": 2.0, "seen": []}


def test_stellaris_step_sizes_shrink_with_the_vth_root_of_staleness():
    rule = Stellaris(root=3)
    assert rule.weights([0, 1, 8, 27]) == pytest.approx([1.0, 1.0, 0.5, 1 / 3])
    assert Stellaris(root=1).weights([4]) == pytest.approx([0.25])


def test_a_round_without_gradients_keeps_bootstrapping():
    rule = Stellaris()
    rule.end_round()
    assert rule.delta_max is None and rule.ready([4], learners=1) == "bootstrap"


def test_the_ablation_rules():
    assert Async().ready([10], learners=4) == "arrival"
    assert Async().weights([3, 0]) == [1.0, 1.0]
    soft = SoftSync(k=3)
    assert soft.ready([0, 0], learners=2) is None and soft.ready([0, 0, 5], learners=2)
    ssp = SSP(s=2)
    assert ssp.admit(2) and not ssp.admit(3)
    assert ssp.ready([0], learners=4, in_flight=[1, 2]) == "bounded"
    assert ssp.ready([0], learners=4, in_flight=[3]) is None  # a slow learner would fall behind
    assert ssp.ready([0, 0, 0, 0], learners=4, in_flight=[3]) == "liveness"


def test_build_rule_validates():
    assert isinstance(build_rule("softsync", k=2), SoftSync)
    with pytest.raises(ValueError, match="rule"):
        build_rule("lockstep")
    with pytest.raises(ValueError, match="decay"):
        build_rule("stellaris", decay=0.0)


def test_combine_is_the_weighted_mean():
    g1 = {"w": torch.tensor([1.0, 2.0])}
    g2 = {"w": torch.tensor([3.0, 6.0])}
    out = combine([g1, g2], [1.0, 0.5])
    assert torch.allclose(out["w"], torch.tensor([(1 + 1.5) / 2, (2 + 3) / 2]))
    with pytest.raises(ValueError):
        combine([g1], [1.0, 1.0])
