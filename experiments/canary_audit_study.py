"""``epsilon_hat`` of honest and deliberately broken mechanisms, beside the accountant's epsilon.

Usage: python experiments/canary_audit_study.py [--out docs/results/numbers]

Runs :func:`fedprivacy.fl.canary_audit.audit_mechanism` (100 users, 40 a round, 20 rounds, 50
canaries, a 300-dimensional update, claimed noise multiplier 6: the most-used canary's epsilon
about 2.5 at delta 1e-5) for the honest central, distributed (over-provisioned) and distributed
(exact) mechanisms and for the three of :mod:`fedprivacy.fl.broken_mechanisms` (central noise at
a tenth, distributed shares at 1/n of their variance, clipping off with updates 30 times the
clip), the distributed ones through the real secure aggregation. Writes ``epsilon_hat.png`` and
``epsilon_hat.csv`` into ``--out``: each mechanism's ``epsilon_hat`` with its 95 % interval and
the accountant's epsilon; the test suite asserts the same verdicts
(``tests/fl/test_canary_audit.py``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

from fedprivacy.fl.broken_mechanisms import QuietCentral, ThinDistributed, Unclipped
from fedprivacy.fl.canary_audit import CanaryAudit, audit_mechanism
from fedprivacy.fl.mechanism import CentralGaussian, DistributedDiscreteGaussian, Mechanism

Z = 6.0
SETTING: dict[str, Any] = dict(
    users=100, per_round=40, rounds=20, canaries=50, dimension=300, seed=0
)
#: (label, mechanism, audit options, honest)
CASES: list[tuple[str, Mechanism, dict[str, Any], bool]] = [
    ("central", CentralGaussian(Z, 1.0), {}, True),
    ("distributed", DistributedDiscreteGaussian(Z, 1.0), {"secagg": True}, True),
    (
        "distributed, exact",
        DistributedDiscreteGaussian(Z, 1.0, noise_mode="exact"),
        {"secagg": True},
        True,
    ),
    ("central, noise / 10", QuietCentral(Z, 1.0), {}, False),
    (
        "distributed, shares / n",
        ThinDistributed(Z, 1.0, noise_mode="exact", parties=40),
        {"secagg": True},
        False,
    ),
    ("clipping off", Unclipped(Z, 1.0), {"update_norm": 30.0}, False),
]


def main() -> None:
    """Audit every case, write the CSV and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/numbers"))
    args = parser.parse_args()
    audits: list[tuple[str, bool, CanaryAudit]] = []
    for label, mechanism, options, honest in CASES:
        audit = audit_mechanism(mechanism, **SETTING, **options)
        audits.append((label, honest, audit))
        e = audit.estimate
        verdict = "passed" if audit.passed else "caught"
        print(
            f"{label}: claimed {audit.epsilon:.3g}, epsilon_hat {e.epsilon:.3g} "
            f"({e.low:.3g} to {e.high:.3g}): {verdict}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "epsilon_hat.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["mechanism", "honest", "claimed", "epsilon_hat", "low", "high", "passed"])
        for label, honest, a in audits:
            e = a.estimate
            w.writerow(
                [
                    label,
                    honest,
                    f"{a.epsilon:.4g}",
                    f"{e.epsilon:.4g}",
                    f"{e.low:.4g}",
                    f"{e.high:.4g}",
                    a.passed,
                ]
            )
    _plot(audits, args.out / "epsilon_hat.png")


def _plot(audits: list[tuple[str, bool, CanaryAudit]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (_, honest, a) in enumerate(audits):
        e = a.estimate
        color = "tab:green" if honest else "tab:red"
        ax.errorbar(
            i,
            e.epsilon,
            yerr=[[e.epsilon - e.low], [e.high - e.epsilon]],
            fmt="o",
            color=color,
            capsize=4,
        )
        ax.plot([i - 0.3, i + 0.3], [a.epsilon, a.epsilon], "k-", lw=2)
    ax.set_xticks(
        range(len(audits)), [label for label, _, _ in audits], rotation=20, ha="right", fontsize=8
    )
    ax.set_ylabel("epsilon at delta 1e-5")
    ax.set_title(
        "epsilon_hat (95 % interval) and the accountant's claim (black): honest green, broken red",
        fontsize=9,
    )
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(path)


if __name__ == "__main__":
    main()
