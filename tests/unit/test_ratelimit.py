"""The rate limit's token bucket on a hand-driven clock (tests/e2e/test_security.py: the API)."""

import pytest
from settled.api.ratelimit import TokenBuckets

from settled.runtime.config import RateLimit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_refills_at_the_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(RateLimit(per_s=2.0, burst=3), clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # one token takes half a second at 2/s
    assert buckets.take("b") == 0.0  # every caller has its own bucket
    clock.now += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") == pytest.approx(0.5)
    clock.now += 60  # a long pause refills to the burst, never beyond
    assert [buckets.take("a") for _ in range(4)][-1] > 0


def test_full_buckets_are_forgotten_so_many_callers_cannot_grow_memory() -> None:
    clock = Clock()
    buckets = TokenBuckets(RateLimit(per_s=10.0, burst=10), clock)
    for caller in range(20_000):
        buckets.take(f"address:{caller}")
        clock.now += 0.01  # each refills within a second
    assert len(buckets) < 12_000
