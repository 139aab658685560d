"""Percentiles and summaries of latency samples (milliseconds)."""

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    p50: float
    p95: float
    p99: float
    mean: float
    max: float

    def as_dict(self) -> dict[str, float]:
        return {key: round(value, 2) for key, value in asdict(self).items()}


def percentile(sorted_samples: list[float], q: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    if not sorted_samples:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_samples)))
    return sorted_samples[rank - 1]


def summarize(samples: list[float]) -> Summary:
    ordered = sorted(samples)
    if not ordered:
        return Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    return Summary(
        n=len(ordered),
        p50=percentile(ordered, 50),
        p95=percentile(ordered, 95),
        p99=percentile(ordered, 99),
        mean=sum(ordered) / len(ordered),
        max=ordered[-1],
    )
