"""The example Flower app with fedprivacy on Flower's simulation engine, up to 1,000 nodes.

Runs ``examples/digits-private`` (the mod and ``PrivateFedAvg``: Multi-RoundSecAgg batches,
SecAgg+ or SecAgg, distributed DP) with ``flwr run`` on a simulation SuperLink with N virtual
SuperNodes (``fedprivacy.flower.deploy.deploy.LocalDeployment``), K of them a round, and reports the
ServerApp's seconds a round (its ``round`` events: training, the protocol's stages and the
mechanism; start-up and the roster call excluded), the seconds of each stage, and the end-to-end
time of the run. The baseline in the same run is the complete graph (SecAgg) at the same N and
K: the ratio is what SecAgg+'s sparse graph saves. The digits dataset has 1,497 training
images, so at N = 1,000 a node holds one or two.

Run::

    .venv/bin/python benchmarks/flower_simulation.py                      # N = 1000, K = 100
    .venv/bin/python benchmarks/flower_simulation.py --nodes 100,1000 --per-round 40 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tomli_w

from fedprivacy.flower.deploy.deploy import terminate_as_interrupt
from fedprivacy.flower.deploy.local_deployment import LocalDeployment

APP = Path(__file__).resolve().parents[1] / "examples" / "digits-private"


def _app_with(work: Path, extra: dict[str, Any]) -> Path:
    """A copy of the example app whose run configuration also has ``extra``'s keys."""
    app = work / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__", "outputs"))
    pyproject = app / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text() + "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items())
    )
    return app


def run_once(nodes: int, per_round: int, rounds: int, degree: int, work: Path) -> dict[str, Any]:
    """One run; ``degree`` 0 is the complete graph (SecAgg)."""
    app = _app_with(work, {"secagg-degree": 2})  # the key, so that the run may set it
    out = work / "out"
    overrides = {
        "out": str(out.resolve()),
        "num-server-rounds": rounds,
        "users": nodes,
        "per-round": per_round,
        "secagg-degree": degree or per_round - 1,
    }
    config = work / "run-config.toml"
    config.write_text(tomli_w.dumps(overrides))
    started = time.monotonic()
    with LocalDeployment(work / "deployment", tls=False) as dep:
        dep.start_superlink(simulation=True)
        dep.write_flower_config(nodes)
        dep.flwr_run(app, config)
        while not (out / "final_model.pt").exists():
            if time.monotonic() - started > 3000:
                raise RuntimeError(f"no result after 3000 s: see {work / 'deployment' / 'logs'}")
            dep.track(2.0)
            time.sleep(0.5)
    total = time.monotonic() - started
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    rounds_s = [e["seconds"] for e in events if e["event"] == "round"]
    stages: dict[str, float] = {}
    for e in events:
        if e["event"] == "stage" and "round" in e:
            stages[e["stage"]] = stages.get(e["stage"], 0.0) + e["seconds"] / rounds
    summary = json.loads((out / "summary.json").read_text())
    return {
        "seconds_per_round": sum(rounds_s) / len(rounds_s),
        "first_round_seconds": rounds_s[0],
        "end_to_end_seconds": total,
        "stages": stages,
        "aggregated": [len(r["aggregated"]) for r in summary["rounds"]],
        "epsilon": summary["privacy"]["epsilon"],
    }


def main() -> None:
    """Parse the options, run every arm, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000", help="virtual SuperNodes N (1000)")
    parser.add_argument("--per-round", type=int, default=100, help="nodes a round K (100)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (2)")
    parser.add_argument("--degree", type=int, default=8, help="SecAgg+ neighbours (8)")
    parser.add_argument("--skip-complete", action="store_true", help="no SecAgg baseline")
    args = parser.parse_args()
    rows = []
    with terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="flower-sim-") as tmp:
        for n in [int(x) for x in args.nodes.split(",")]:
            arms = [("secagg+", args.degree)] + ([] if args.skip_complete else [("secagg", 0)])
            for name, degree in arms:
                print(f"N={n} K={args.per_round} {name} ...", file=sys.stderr, flush=True)
                work = Path(tmp) / f"{name}-{n}"
                work.mkdir()
                row = run_once(n, args.per_round, args.rounds, degree, work)
                row.update(arm=name, nodes=n)
                print(f"  {row['seconds_per_round']:.1f} s a round", file=sys.stderr, flush=True)
                rows.append(row)
    print(
        f"Flower simulation engine, {platform.node()}, {time.strftime('%Y-%m-%d %H:%M')}; "
        f"K = {args.per_round} a round, {args.rounds} rounds, SecAgg+ degree {args.degree}\n"
    )
    print("| N | arm | s / round | first round | end to end | stages (s / round) | vs SecAgg |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        base = next((b for b in rows if b["nodes"] == r["nodes"] and b["arm"] == "secagg"), None)
        ratio = "" if base is None else f"{r['seconds_per_round'] / base['seconds_per_round']:.2f}x"
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items())
        print(
            f"| {r['nodes']} | {r['arm']} | {r['seconds_per_round']:.1f} | "
            f"{r['first_round_seconds']:.1f} | {r['end_to_end_seconds']:.0f} | {stages} | {ratio} |"
        )


if __name__ == "__main__":
    main()
