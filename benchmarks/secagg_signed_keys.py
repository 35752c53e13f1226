"""Signed SecAgg keys (issue #50), in process: what they add to a secure round.

Baseline, in the same run: the round as fedprivacy ran it before, in two forms:

* ``unauthenticated``: Bonawitz et al.'s honest-but-curious protocol (no node keys at all,
  ``fedprivacy.secagg.run_round`` without ``signing_keys``);
* ``authenticated``: with node keys, which now means the keys signed and checked against each
  node's roster before any share is sealed, plus the survivor-list consistency check.

and, measured apart in the same process, the work the key signatures add to each client: one
ECDSA P-256 signature on its keys, one verification for each neighbour in its key roster
(``sign_keys``, ``verify_keys``). Its share of the authenticated client's time is what signed keys
cost over the authenticated round of before (which ran the same consistency check).

For each K (all selected; the complete graph up to 32 and SecAgg+ above, the pipeline's
default) and d (1e4 by default), R rounds each way, interleaved. The signatures do not grow with
d, so their share falls as the update grows.

Run::

    .venv/bin/python benchmarks/secagg_signed_keys.py            # K = 10, 100
    .venv/bin/python benchmarks/secagg_signed_keys.py --k 10,100 --dimension 100000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.keys import generate_keypair
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.secagg import SecAggParameters, run_round
from fedprivacy.secagg.consistency import checks_for
from fedprivacy.secagg.params import round_degree
from fedprivacy.secagg.signed_keys import sign_keys, verify_keys


def signature_seconds(params: SecAggParameters, keys: dict[int, SigningKey], user: int) -> float:
    """One client's key-signature work: sign its keys, verify each neighbour's."""
    checks = checks_for(keys)
    pairs = {v: (generate_keypair().public_bytes, generate_keypair().public_bytes) for v in keys}
    signed = {
        v: sign_keys(checks[v], params, v, *pairs[v], epoch=False) for v in params.neighbours[user]
    }
    roster = checks[user].roster
    start = time.perf_counter()
    sign_keys(checks[user], params, user, *pairs[user], epoch=False)
    for v, signature in signed.items():
        verify_keys(roster, params, v, *pairs[v], signature)
    return time.perf_counter() - start


def measure(k: int, rounds: int, seed: int, dimension: int) -> dict[str, float]:
    """Both arms' mean client and server seconds at K, and the signature work per client."""
    codec = FixedPointCodec.for_sum(1.0, k, 32)
    session = os.urandom(16)
    rng = np.random.default_rng(seed)
    keys = {u: SigningKey.generate() for u in range(k)}
    rows: dict[str, list[tuple[float, float]]] = {"unauthenticated": [], "authenticated": []}
    signing: list[float] = []
    for r in range(rounds + 1):
        degree = round_degree(None, k, 1)
        params = SecAggParameters.create(session, r, range(k), dimension, codec, degree=degree)
        updates = {u: rng.uniform(-1, 1, dimension) for u in range(k)}
        plain = run_round(params, updates)
        signed = run_round(params, updates, signing_keys=keys)
        if r:  # round 0 warms up
            for arm, outcome in (("unauthenticated", plain), ("authenticated", signed)):
                clients = float(np.mean(list(outcome.client_seconds.values())))
                rows[arm].append((clients, outcome.server_seconds))
            signing.append(signature_seconds(params, keys, int(rng.integers(k))))
    out = {f"{arm} client": float(np.mean([v[0] for v in rows[arm]])) for arm in rows}
    out.update({f"{arm} server": float(np.mean([v[1] for v in rows[arm]])) for arm in rows})
    out["signatures"] = float(np.mean(signing))
    out["holders"] = float(min(len(v) for v in params.neighbours.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table (Markdown) for each K."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="10,100", help="users a round, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="rounds measured per K (5)")
    parser.add_argument("--dimension", type=int, default=10_000, help="d (10,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.machine()} {os.cpu_count()} cores, {stamp}")
    print(f"# d = {args.dimension}, {args.rounds} rounds each\n")
    print(
        "| K | holders | client s unauth. | client s auth. | auth. / unauth. | key signatures s "
        "a client | share of auth. client | server s unauth. / auth. |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for k in (int(k) for k in args.k.split(",")):
        print(f"K = {k} ...", file=sys.stderr)
        v = measure(k, args.rounds, args.seed, args.dimension)
        auth, plain = v["authenticated client"], v["unauthenticated client"]
        print(
            f"| {k} | {v['holders']:.0f} | {plain:.4f} | {auth:.4f} | {auth / plain:.2f}x | "
            f"{v['signatures']:.4f} | {100 * v['signatures'] / auth:.1f} % | "
            f"{v['unauthenticated server']:.3f} / {v['authenticated server']:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
