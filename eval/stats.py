"""Statistics of timing samples: the leaderboard's Stats, the geometric mean, bootstrap ratios."""
from __future__ import annotations

import dataclasses
import math
import random
import statistics


@dataclasses.dataclass
class Stats:
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float
    median: float

    # the leaderboard prints these fields, in this order
    POPCORN_FIELDS = ("runs", "mean", "std", "err", "best", "worst")


def calculate_stats(durations: list[float]) -> Stats:
    """Durations in ns -> Stats, computed as the leaderboard does (sample std, err = std/sqrt(n))."""
    runs = len(durations)
    if runs == 0:
        raise ValueError("no samples")
    mean = sum(durations) / runs
    std = math.sqrt(sum((x - mean) ** 2 for x in durations) / (runs - 1)) if runs > 1 else 0.0
    return Stats(
        runs=runs,
        mean=mean,
        std=std,
        err=std / math.sqrt(runs),
        best=float(min(durations)),
        worst=float(max(durations)),
        median=float(statistics.median(durations)),
    )


def should_stop(durations: list[float], elapsed_ns: float, max_time_ns: float, wall_cap_ns: float = 120e9,
                rel_err: float = 0.001, min_elapsed_ns: float = 1e8) -> bool:
    """The leaderboard's stop rule, checked after each timed run: at least 3 runs and min_elapsed_ns of
    wall time (100 ms), then stop once the standard error is under rel_err of the mean (0.1 %), or the
    summed kernel time passes max_time_ns, or the wall time passes wall_cap_ns (2 minutes). rel_err and
    min_elapsed_ns are the folder's evaluator's (problem_folder.Timing)."""
    if len(durations) < 3 or elapsed_ns <= min_elapsed_ns:
        return False
    stats = calculate_stats(durations)
    return (
        stats.err / stats.mean < rel_err
        or stats.mean * stats.runs > max_time_ns
        or elapsed_ns > wall_cap_ns
    )


def geomean(values: list[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


RANKINGS = ("geom", "mean", "last")  # task.yml's ranking_by, as the leaderboard's RankCriterion


def score(means: list[float], ranking_by: str = "geom") -> float:
    """A submission's score over its benchmark means, by task.yml's ranking_by."""
    if ranking_by == "mean":
        return sum(means) / len(means)
    if ranking_by == "last":
        return means[-1]
    return geomean(means)


def _resampled_mean(samples: list[float], rng: random.Random) -> float:
    n = len(samples)
    return sum(samples[rng.randrange(n)] for _ in range(n)) / n


def bootstrap_ratio(a_cases: list[list[float]], b_cases: list[list[float]], rounds: int = 2000, seed: int = 0):
    """Ratio of mean times B/A per case and of their geometric means, each with a 95 % bootstrap
    interval (percentile method, cases resampled independently).

    Returns (per_case: list[(ratio, lo, hi)], geomean: (ratio, lo, hi))."""
    rng = random.Random(seed)
    per_case_draws = [[] for _ in a_cases]
    geo_draws = []
    for _ in range(rounds):
        ratios = []
        for i, (a, b) in enumerate(zip(a_cases, b_cases)):
            r = _resampled_mean(b, rng) / _resampled_mean(a, rng)
            per_case_draws[i].append(r)
            ratios.append(r)
        geo_draws.append(geomean(ratios))

    def interval(point: float, draws: list[float]):
        draws = sorted(draws)
        return point, draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]

    points = [statistics.fmean(b) / statistics.fmean(a) for a, b in zip(a_cases, b_cases)]
    per_case = [interval(p, d) for p, d in zip(points, per_case_draws)]
    return per_case, interval(geomean(points), geo_draws)


def verdict(ratio: float, lo: float, hi: float, min_effect: float = 0.01) -> str:
    """'faster' / 'slower' when the 95 % interval of B/A excludes 1 and the change is at least
    min_effect (1 %); otherwise 'same'."""
    if hi < 1.0 and ratio < 1.0 - min_effect:
        return "faster"
    if lo > 1.0 and ratio > 1.0 + min_effect:
        return "slower"
    return "same"
