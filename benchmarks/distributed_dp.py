"""What distributed DP adds to a secure-aggregation round, and the sampler that makes it cheap.

Two measurements in one run:

1. **The sampler.** ``discrete_gaussian_array`` (vectorised, exact) against the scalar exact
   sampler ``discrete_gaussian_vector`` (the baseline: what party noise used before), both at a
   variance of the size a 32-bit codec gives (2^51), for growing sizes.
2. **A round.** ``SecureAggregator.aggregate`` of ``K`` parties over ``d`` coordinates, without DP
   (the baseline) and with each party's distributed discrete Gaussian, for growing ``d``: the
   ratio is the mechanism's cost inside the round.

Usage: python benchmarks/distributed_dp.py [--parties K] [--repeats R]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from fedprivacy.dp import discrete_gaussian_array as array_sampler
from fedprivacy.dp.discrete_gaussian import discrete_gaussian_vector
from fedprivacy.dp.discrete_gaussian_array import discrete_gaussian_array
from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.fl.secure_aggregation import SecureAggregator

VARIANCE = Fraction(2**51)


def _best(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def _os_bytes(fn: Callable[[], object]) -> int:
    """Bytes of OS randomness the vectorised sampler reads during ``fn()``."""
    read = [0]
    original = array_sampler.os.urandom

    def counted(n: int) -> bytes:
        read[0] += n
        return original(n)

    array_sampler.os.urandom = counted  # type: ignore[assignment]
    try:
        fn()
    finally:
        array_sampler.os.urandom = original  # type: ignore[assignment]
    return read[0]


def sampler(repeats: int) -> None:
    print("## Sampler: N_Z(0, 2^51), seconds (best of repeats)")
    print("| samples | vectorised | OS random bytes / sample | scalar (baseline) | speed-up |")
    print("|---|---|---|---|---|")
    for size in (1_000, 10_000, 100_000, 1_000_000):
        draw = lambda size=size: discrete_gaussian_array(VARIANCE, size)  # noqa: E731
        fast = _best(draw, repeats)
        per_sample = _os_bytes(draw) / size
        if size > 100_000:  # the scalar sampler: about 50 microseconds a sample
            print(f"| {size:,} | {fast:.4f} | {per_sample:.1f} | - | - |")
            continue
        slow = _best(lambda size=size: discrete_gaussian_vector(VARIANCE, size), 1)
        print(f"| {size:,} | {fast:.4f} | {per_sample:.1f} | {slow:.3f} | {slow / fast:.1f}x |")


def rounds(parties: int, repeats: int) -> None:
    print(f"\n## A SecAgg round of {parties} parties, seconds (best of repeats)")
    print("| d | no DP (baseline) | distributed DP | ratio | noise per party |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for d in (1_000, 10_000, 100_000):
        raw = rng.normal(size=(parties, d))
        raw /= np.linalg.norm(raw, axis=1, keepdims=True)
        updates = {u: raw[u] for u in range(parties)}
        weights = dict.fromkeys(updates, 1.0)
        plain = SecureAggregator(1.0, parties, 32, 0)
        noisy = SecureAggregator(1.0, parties, 32, 0, party_noise=PartyNoise(1.0, 1.0))
        base = _best(lambda p=plain, u=updates, w=weights: p.aggregate(0, u, w), repeats)
        dp = _best(lambda p=noisy, u=updates, w=weights: p.aggregate(0, u, w), repeats)
        per_party = _best(lambda d=d: discrete_gaussian_array(VARIANCE, d), repeats)
        print(f"| {d:,} | {base:.3f} | {dp:.3f} | {dp / base:.2f}x | {per_party:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parties", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"# distributed DP, {platform.machine()}, {time.strftime('%Y-%m-%d')}\n")
    sampler(args.repeats)
    rounds(args.parties, args.repeats)


if __name__ == "__main__":
    main()
