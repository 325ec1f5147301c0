"""Stats, stop rule, geomean, seeds, bootstrap verdicts: pure functions with known answers."""
import math
import random

import pytest

from eval import cases
from eval.stats import bootstrap_ratio, calculate_stats, geomean, should_stop, verdict


def test_stats_hand_computed():
    s = calculate_stats([1.0, 2.0, 3.0, 4.0])
    assert (s.runs, s.mean, s.best, s.worst, s.median) == (4, 2.5, 1.0, 4.0, 2.5)
    assert s.std == pytest.approx(math.sqrt(5 / 3))
    assert s.err == pytest.approx(math.sqrt(5 / 3) / 2)


def test_stop_rule():
    steady = [1000.0] * 3
    assert not should_stop(steady[:2], 2e8, 10e9)  # fewer than 3 runs
    assert not should_stop(steady, 5e7, 10e9)  # under 100 ms
    assert should_stop(steady, 2e8, 10e9)  # zero error
    noisy = [1000.0, 2000.0, 3000.0]
    assert not should_stop(noisy, 2e8, 10e9)
    assert should_stop(noisy, 2e8, 5000.0)  # kernel time budget spent
    assert should_stop(noisy, 121e9, 10e9)  # 2 minutes of wall time


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        geomean([])


def test_seed_combination_is_cantor():
    assert cases.combine_seed(1111, 0) == 1111 + 1111 * 1112 // 2
    assert cases.combine_seed(3, 4) == 3 + 7 * 8 // 2


def test_secret_seed_removed_from_environment():
    env = {"POPCORN_SEED": "12345"}
    assert cases.take_secret_seed(env) == 12345 and "POPCORN_SEED" not in env
    seeded = cases.apply_secret_seed(cases.select_cases("tests")[:1], 12345)
    assert seeded[0].args["seed"] == cases.combine_seed(1111, 12345)
    assert seeded[0].spec.endswith("seed: 1111")


def _samples(mean, sd, n, seed):
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_bootstrap_same_distribution_is_same():
    a, b = _samples(100, 1, 200, 1), _samples(100, 1, 200, 2)
    per_case, geo = bootstrap_ratio([a], [b], rounds=500)
    assert verdict(*per_case[0]) == "same" and verdict(*geo) == "same"


def test_bootstrap_detects_five_percent_shift():
    a, b = _samples(100, 0.5, 200, 1), _samples(105, 0.5, 200, 2)
    per_case, geo = bootstrap_ratio([a], [b], rounds=500)
    ratio, lo, hi = per_case[0]
    assert lo < 1.05 < hi or abs(ratio - 1.05) < 0.005
    assert verdict(*per_case[0]) == "slower" and verdict(*geo) == "slower"
    assert verdict(*bootstrap_ratio([b], [a], rounds=500)[1]) == "faster"
