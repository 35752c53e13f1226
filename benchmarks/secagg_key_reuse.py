"""Reused SecAgg keys against fresh keys every round, in process: cost, bytes and aborted rounds.

Baseline: Bonawitz et al.'s protocol as fedprivacy runs it by default, two fresh X25519 key pairs
per user per round, shared with the self-mask seed (``fedprivacy.secagg.run_round``). Against it,
the same rounds with every user reusing its keys (``KeyEpoch``, ``registered=`` the keys the
server holds from the first round): no ``advertise`` stage after the first round, no masking key
shared, round-scoped pairwise keys revealed for the users left out.

For each K (users a round, all selected, the complete graph up to 32 and SecAgg+ above, as the
pipeline's default) and d = 1e4, R rounds each way, interleaved in one process:

* ``client s``: a user's computation a round (all its stages, serialisation included), mean;
* ``server s``: the server's computation a round;
* ``MB``: the bytes of all messages a round;
* ``aborted``: rounds without an aggregate when each user drops before each stage with
  probability ``--dropout`` (the same scripted dropouts for both): reused keys abort when an
  aggregated user goes silent before unmasking while a neighbour of it is left out.

Run::

    .venv/bin/python benchmarks/secagg_key_reuse.py                 # K = 10, 40, 100
    .venv/bin/python benchmarks/secagg_key_reuse.py --k 10 --rounds 3 --quick
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Mapping

import numpy as np

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.secagg import KeyEpoch, RoundAbortedError, SecAggParameters, Stage, run_round
from fedprivacy.secagg.params import round_degree
from fedprivacy.secagg.server import SecAggServer

DIMENSION = 10_000


def dropouts(k: int, rate: float, rng: np.random.Generator) -> dict[int, Stage]:
    """Each user drops before each of the four stages with probability ``rate``."""
    out = {}
    for u in range(k):
        for stage in Stage:
            if rng.random() < rate:
                out[u] = stage
                break
    return out


def one_round(
    params: SecAggParameters,
    updates: Mapping[int, np.ndarray],
    drop: dict[int, Stage],
    epochs: dict[int, KeyEpoch] | None,
    registered: dict[int, tuple[bytes, bytes, bytes]],
) -> tuple[float, float, int, bool, dict[int, tuple[bytes, bytes, bytes]]]:
    """Client seconds (mean), server seconds, bytes, aborted, and the keys to register next."""
    servers: list[SecAggServer] = []
    try:
        outcome = run_round(
            params,
            updates,
            dropouts=drop,
            epochs=epochs,
            registered=registered,
            observer=servers.append,
        )
    except RoundAbortedError:
        return float("nan"), float("nan"), 0, True, servers[0].reused_keys() if servers else {}
    clients = float(np.mean(list(outcome.client_seconds.values())))
    return clients, outcome.server_seconds, outcome.wire_bytes, False, servers[0].reused_keys()


def measure(k: int, rounds: int, rate: float, seed: int) -> dict[str, dict[str, float]]:
    """Both arms at K over ``rounds`` rounds (after one warm-up round each)."""
    codec = FixedPointCodec.for_sum(1.0, k, 32)
    session = os.urandom(16)
    rng = np.random.default_rng(seed)
    epochs = {u: KeyEpoch.start(session, u, max_rounds=rounds + 1) for u in range(k)}
    registered: dict[int, tuple[bytes, bytes, bytes]] = {}
    rows: dict[str, list[tuple[float, float, int, bool]]] = {"fresh": [], "reused": []}
    for r in range(rounds + 1):
        degree = round_degree(None, k, 1)
        params = SecAggParameters.create(session, r, range(k), DIMENSION, codec, degree=degree)
        updates = {u: rng.uniform(-1, 1, DIMENSION) for u in range(k)}
        drop = dropouts(k, rate, rng) if r else {}
        *fresh, _ = one_round(params, updates, drop, None, {})
        *reused, keys = one_round(params, updates, drop, epochs, registered)
        registered = {**registered, **keys}
        if r:  # round 0 is the warm-up, and the round where everyone advertises
            rows["fresh"].append((fresh[0], fresh[1], fresh[2], fresh[3]))
            rows["reused"].append((reused[0], reused[1], reused[2], reused[3]))
    out = {}
    for arm, values in rows.items():
        done = [v for v in values if not v[3]]
        out[arm] = {
            "client_seconds": float(np.mean([v[0] for v in done])) if done else float("nan"),
            "server_seconds": float(np.mean([v[1] for v in done])) if done else float("nan"),
            "megabytes": float(np.mean([v[2] for v in done])) / 1e6 if done else float("nan"),
            "aborted": float(sum(v[3] for v in values)),
            "rounds": float(len(values)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table (Markdown) for each K."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="10,40,100", help="users a round, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="rounds measured per K (5)")
    parser.add_argument("--dropout", type=float, default=0.0, help="per-stage dropout (0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="K = 10, 2 rounds")
    args = parser.parse_args(argv)
    ks = [10] if args.quick else [int(k) for k in args.k.split(",")]
    rounds = 2 if args.quick else args.rounds
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.machine()} {os.cpu_count()} cores, {stamp}")
    print(f"# d = {DIMENSION}, {rounds} rounds each, dropout {args.dropout} per stage\n")
    print("| K | arm | client s | server s | MB | aborted / rounds | client fresh / reused |")
    print("|---|---|---|---|---|---|---|")
    for k in ks:
        print(f"K = {k} ...", file=sys.stderr)
        res = measure(k, rounds, args.dropout, args.seed)
        ratio = res["fresh"]["client_seconds"] / res["reused"]["client_seconds"]
        for arm in ("fresh", "reused"):
            v = res[arm]
            shown = f"{ratio:.2f}x" if arm == "reused" else ""
            print(
                f"| {k} | {arm} | {v['client_seconds']:.4f} | {v['server_seconds']:.3f} | "
                f"{v['megabytes']:.2f} | {v['aborted']:.0f} / {v['rounds']:.0f} | {shown} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
