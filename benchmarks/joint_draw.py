"""The nodes' draw (issue #50), in process: what it adds to a session.

Before the first selection with batches, or the first round on a sparse graph, the nodes draw a
seed together (three exchanges: ``commit``, ``reveal``, ``draw``; :mod:`fedprivacy.flower.
joint_draw`), once a session: the SecAgg+ graph's seed and the batch layout. Each later round
costs each node one hash (``check_graph_seed``) and, with batches, its layout's derivation and
comparison with the round's positions (``check_batch_layout``: K hashes and a sort). Measured on
the real path: the server's :func:`~fedprivacy.flower.messaging.joint_draw.draw_joint` over the
in-process transport to :class:`~fedprivacy.flower.nodes.node.Node` objects (each handling its
requests with its state, as a SuperNode does, network excepted).

Baseline, in the same run: one secure round of today's protocol at the same K, degree and d,
with node authentication (``fedprivacy.secagg.run_round`` with signing keys; all clients' and
the server's seconds summed, as the draw's are), which a session pays every round. The draw's
share of a session of R rounds is ``draw / (draw + R * round)``.

Run::

    .venv/bin/python benchmarks/joint_draw.py                  # K = 10, 100, 1000
    .venv/bin/python benchmarks/joint_draw.py --k 100 --dimension 100000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.joint_draw import check_batch_layout, check_graph_seed, draw_joint
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg import SecAggParameters, run_round
from fedprivacy.secagg.params import round_degree


def _sparse_degree(k: int) -> int:
    """The pipeline's degree above 32 users; below, the smallest even degree a ring allows."""
    degree = round_degree(None, k, 1)
    return degree if degree is not None else min(4, k - 1)


def measure(k: int, repeats: int, dimension: int) -> dict[str, float]:
    """Median seconds of a draw, of a signed secure round, and of one node's per-round checks."""
    nodes = {u: Node(u, policy=PartyPolicy(allow_unauthenticated=True)) for u in range(k)}
    transport = InProcessTransport(nodes)
    exchange = StageExchange(transport)
    codec = FixedPointCodec.for_sum(1.0, k, 32)
    keys = {u: SigningKey.generate() for u in range(k)}
    rng = np.random.default_rng(0)
    degree = _sparse_degree(k)
    draws, rounds, checks, layouts = [], [], [], []
    batches = PartyPolicy(batch_size=2, allow_unauthenticated=True)
    for r in range(repeats + 1):
        session = os.urandom(16)
        start = time.perf_counter()
        draw = draw_joint(exchange, r, session, range(k))
        drawn = time.perf_counter() - start
        assert draw is not None
        positions = [draw.layout.position[u] for u in range(k)]
        params = SecAggParameters.create(
            session, r, range(k), dimension, codec, degree=degree, graph_seed=draw.graph_seed
        )
        start = time.perf_counter()
        check_graph_seed(params, transport.states[0])
        checked = time.perf_counter() - start
        placed = SecAggParameters.create(session, r, range(k), 1, codec, positions=positions)
        start = time.perf_counter()
        check_batch_layout(batches, placed, transport.states[0])
        layout_checked = time.perf_counter() - start
        updates = {u: rng.uniform(-1, 1, dimension) for u in range(k)}
        outcome = run_round(params, updates, signing_keys=keys)
        if r:  # the first repeat warms up
            draws.append(drawn)
            checks.append(checked)
            layouts.append(layout_checked)
            rounds.append(sum(outcome.client_seconds.values()) + outcome.server_seconds)
    return {
        "degree": float(degree),
        "draw": float(np.median(draws)),
        "round": float(np.median(rounds)),
        "check": float(np.median(checks)),
        "layout": float(np.median(layouts)),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the table (Markdown) for each K."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="10,100,1000", help="nodes, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="draws and rounds per K (5)")
    parser.add_argument("--dimension", type=int, default=10_000, help="d (10,000)")
    parser.add_argument("--session-rounds", type=int, default=10, help="R of the share (10)")
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.machine()} {os.cpu_count()} cores, {stamp}")
    print(f"# d = {args.dimension}, median of {args.repeats}, R = {args.session_rounds}\n")
    print(
        "| K | degree | draw s (once a session) | signed secure round s | draw / round | "
        f"draw's share of {args.session_rounds} rounds | a node's seed check per round s | "
        "its layout check per round s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for k in (int(k) for k in args.k.split(",")):
        print(f"K = {k} ...", file=sys.stderr)
        v = measure(k, args.repeats, args.dimension)
        share = v["draw"] / (v["draw"] + args.session_rounds * v["round"])
        print(
            f"| {k} | {v['degree']:.0f} | {v['draw']:.4f} | {v['round']:.4f} | "
            f"{v['draw'] / v['round']:.2f}x | {100 * share:.1f} % | {v['check']:.2e} | "
            f"{v['layout']:.2e} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
