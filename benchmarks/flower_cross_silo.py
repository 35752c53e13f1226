"""Cross-silo ULDP-FL on a Flower deployment against the same protocol in one process.

For each number of users ``U`` the script runs ULDP-AVG-w with the private weighting protocol
(Protocol 1: Paillier, X25519 key agreement relayed by the server, blinded histograms, masks) on
the 4 Heart Disease silos (the paper's Zipf allocation of records to users) twice, with the same
configuration and the same code (:func:`fedprivacy.flower.uldp.cross_silo.run_cross_silo`):

* **in-process** (the baseline): the four :class:`~fedprivacy.flower.uldp.silo_node.SiloNode`
objects
  live in the server's process (:class:`~fedprivacy.flower.messaging.transport.InProcessTransport`);
  every message still goes through its byte encoding;
* **Flower**: the deployment of ``fedprivacy flower cross-silo``
  (:func:`fedprivacy.flower.deploy.deploy.deploy`): a SuperLink and one SuperNode per silo on
  127.0.0.1 over TLS, the ServerApp started by ``flwr run``, one ClientApp process per message.

It reports Protocol 1's setup (seconds of its three exchanges; the server's key generation
comes before them and is not included), the seconds per round of the
ServerApp's round loop (the same definition for both: the summary's ``seconds_per_round``), the
whole run's wall time (for Flower: process start-up and shutdown included), the payload bytes of
the protocol's records, and for Flower the bytes on the loopback interface (``/proc/net/dev``:
TLS, HTTP and Flower's polling included). Ratios are Flower / in-process; "Flower's cost a
round" is the difference in seconds per round. Both arms check their
aggregates against the in-process plaintext sum (the silos' noise is the only difference).

Run::

    .venv/bin/python benchmarks/flower_cross_silo.py                 # U = 40, 120, 360; 2048 bits
    .venv/bin/python benchmarks/flower_cross_silo.py --quick         # U = 40, 1024 bits, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fedprivacy.flower.deploy.deploy import deploy, terminate_as_interrupt
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.uldp.cross_silo import run_cross_silo
from fedprivacy.flower.uldp.cross_silo_reference import compare_cross_silo
from fedprivacy.flower.uldp.silo_node import SiloNode
from fedprivacy.flower.uldp.silo_policy import silo_policy
from fedprivacy.uldp.config import UldpConfig
from flower_deploy import loopback_bytes  # this directory's script, run beside it

SILOS = 4


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _row(summary: dict[str, Any], wall: float, check: dict[str, Any]) -> dict[str, Any]:
    return {
        "setup_seconds": sum(summary["setup_seconds"].values()),
        "seconds_per_round": summary["seconds_per_round"],
        "wall_seconds": wall,
        "payload_bytes": summary["bytes_sent"] + summary["bytes_received"],
        "rounds_aggregated": summary["rounds_aggregated"],
        "max_abs_error_vs_plaintext": check["max_abs_error_vs_simulation"],
        "noise_std_expected": check["noise_std_expected"],
    }


def in_process(config: UldpConfig, data_dir: str, work: Path) -> dict[str, Any]:
    """The baseline: the silos are objects in this process."""
    # what each silo's operator writes (as `deploy --insecure` does: no node keys in process)
    policy = silo_policy(config).with_overrides(allow_unauthenticated=True)
    nodes = {s: SiloNode(s, "", data_dir, policy) for s in range(SILOS)}
    started = time.monotonic()
    summary = run_cross_silo(config, InProcessTransport(nodes), work)
    wall = time.monotonic() - started
    return _row(summary, wall, compare_cross_silo(work, data_dir))


def flower(config: UldpConfig, data_dir: str, work: Path) -> dict[str, Any]:
    """The deployment: a SuperLink and 4 SuperNodes over TLS on loopback."""
    before, started = loopback_bytes(), time.monotonic()
    summary = deploy(config, SILOS, work, data_dir=data_dir, tls=True, stage_timeout=600.0)
    wall = time.monotonic() - started
    row = _row(summary, wall, summary)
    row["loopback_bytes"] = loopback_bytes() - before
    return row


def main() -> None:
    with terminate_as_interrupt():  # SIGTERM stops the deployment's processes too
        run()


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="40,120,360", help="users, comma-separated")
    parser.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus bits (2048)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per arm (2)")
    parser.add_argument("--data-dir", default=os.environ.get("FEDPRIVACY_DATA"), help="data")
    parser.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    parser.add_argument("--quick", action="store_true", help="U = 40, 1024 bits, one round")
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("--data-dir (or $FEDPRIVACY_DATA) is needed: the Heart Disease silos")
    users = [40] if args.quick else [int(u) for u in args.users.split(",")]
    bits = 1024 if args.quick else args.key_bits
    rounds = 1 if args.quick else args.rounds
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cross-silo-bench-") as tmp:
        for u in users:
            config = UldpConfig(
                dataset="heart_disease",
                method="ULDP-AVG-w",
                users=u,
                distribution="zipf",  # the paper's; every user holds a record up to 486 users
                rounds=rounds,
                noise_multiplier=1.0,
                secure_key_bits=bits,
                insecure_test_keys=bits < 2048,
                data_dir=args.data_dir,
            )
            for arm, fn in (("in-process", in_process), ("flower", flower)):
                _log(f"U={u} {arm} ...")
                row = fn(config, args.data_dir, Path(tmp) / f"{arm}-{u}")
                row.update(arm=arm, users=u)
                _log(
                    f"  setup {row['setup_seconds']:.1f} s, "
                    f"{row['seconds_per_round']:.1f} s a round"
                )
                rows.append(row)
    print(
        f"Cross-silo ULDP-AVG-w, Flower deployment vs in-process, {platform.node()}, "
        f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M %Z')}; Heart Disease, 4 silos, "
        f"{bits}-bit Paillier, {rounds} round(s)\n"
    )
    print(
        "| U | arm | setup s | s / round | wall s | payload kB | loopback kB | "
        "round vs in-process | Flower's cost a round | max error (noise std) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for u in users:
        base, dep = (
            next(r for r in rows if r["users"] == u and r["arm"] == a)
            for a in ("in-process", "flower")
        )
        for r in (base, dep):
            loop = f"{r['loopback_bytes'] / 1e3:.0f}" if "loopback_bytes" in r else "-"
            print(
                f"| {u} | {r['arm']} | {r['setup_seconds']:.1f} | {r['seconds_per_round']:.2f} | "
                f"{r['wall_seconds']:.1f} | {r['payload_bytes'] / 1e3:.0f} | {loop} | "
                f"{r['seconds_per_round'] / base['seconds_per_round']:.2f}x | "
                f"{r['seconds_per_round'] - base['seconds_per_round']:+.1f} s | "
                f"{r['max_abs_error_vs_plaintext']:.3f} ({r['noise_std_expected']:.3f}) |"
            )
    if len(users) > 1:
        first = [r for r in rows if r["users"] == users[0]]
        last = [r for r in rows if r["users"] == users[-1]]
        for a, b in zip(first, last, strict=True):
            print(
                f"{a['arm']}: {users[-1] / users[0]:.0f}x the users -> "
                f"{b['seconds_per_round'] / a['seconds_per_round']:.2f}x the seconds per round, "
                f"{b['setup_seconds'] / a['setup_seconds']:.2f}x the setup"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
