"""The ``account`` subcommand: epsilon of a composed (sub-sampled) Gaussian mechanism."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.options import Use, add_options
from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.dp.group_privacy import GroupPrivacyResult


def _fmt(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "inf"
    return f"{value:.{digits}g}"


def cmd_account(args: argparse.Namespace) -> int:
    """Compose ``--steps`` Gaussian steps and print epsilon (and group-privacy bounds)."""
    from fedprivacy._validation import require_int
    from fedprivacy.dp._checks import require_delta, require_positive, require_sampling_rate
    from fedprivacy.dp.accounting import PrivacyAccountant, quiet_accounting

    noise = require_positive("--noise-multiplier", args.noise_multiplier)
    rate = require_sampling_rate("--sampling-rate", args.sampling_rate)
    steps = require_int("--steps", args.steps, minimum=1)
    delta = require_delta("--delta", args.delta)
    group_size = None
    if args.group_size is not None:
        group_size = require_int("--group-size", args.group_size, minimum=1)
        if args.accountant != "rdp":
            raise ParameterError(
                "--group-size",
                "group privacy works on the RDP curve; use --accountant rdp (the default)",
            )
    acc = PrivacyAccountant(args.accountant)
    with quiet_accounting():
        acc.compose_gaussian(noise, steps, rate)
        epsilon, order = acc.epsilon_and_order(delta)
    if order is not None and not math.isfinite(order):
        order = None
    report: dict[str, Any] = {
        "epsilon": epsilon if math.isfinite(epsilon) else None,
        "delta": delta,
        "accountant": args.accountant,
        "noise_multiplier": noise,
        "sampling_rate": rate,
        "steps": steps,
        "order": order,
    }
    with quiet_accounting():
        group = acc.group_privacy(group_size, delta) if group_size is not None else None
    if group is not None:
        report["group_size"] = group.group_size
        report["group_epsilon"] = group.to_dict()["epsilon"]
        report["routes"] = [
            {
                "route": b.route,
                "epsilon": b.to_dict()["epsilon"],
                "delta": b.delta,
                "valid": b.valid,
                "order": b.order,
            }
            for b in group.bounds
        ]
        report["chosen"] = group.chosen.route
    if args.json:
        print(json.dumps(report))
    elif args.quiet:
        print(_fmt(epsilon if group is None else group.chosen.epsilon))
    else:
        _print_table(report, group)
    return 0


def _print_table(report: dict[str, Any], group: GroupPrivacyResult | None) -> None:
    """The report as aligned lines, then the group-privacy routes (with ``--group-size``)."""
    order, delta = report["order"], report["delta"]
    epsilon = math.inf if report["epsilon"] is None else report["epsilon"]
    rows = [
        ("accountant", report["accountant"]),
        ("noise multiplier", _fmt(report["noise_multiplier"])),
        ("sampling rate", _fmt(report["sampling_rate"])),
        ("steps", str(report["steps"])),
        ("delta", _fmt(delta)),
        ("epsilon", _fmt(epsilon) + (f"  (RDP order {_fmt(order)})" if order else "")),
    ]
    for name, value in rows:
        print(f"{name:<18}{value}")
    if group is None:
        return
    print()
    print(f"group privacy, groups of {group.group_size} records, delta {_fmt(delta)}:")
    print(f"  {'route':<16}{'epsilon':>14}  {'valid':<7}{'order':>8}")
    for b in group.bounds:
        mark = "  <- chosen" if b is group.chosen else ""
        print(
            f"  {b.route:<16}{_fmt(b.epsilon):>14}  {('yes' if b.valid else 'NO'):<7}"
            f"{_fmt(b.order, 5):>8}{mark}"
        )
    if not group.bound("rdp-all-orders").valid:
        print(
            "  (rdp-all-orders ignores Lemma 6's condition alpha >= 2^(c+1); it is not a "
            "proven bound and is shown for comparison with the paper's Fig. 2)"
        )


def add_account_parser(sub: Any) -> None:
    """Register ``fedprivacy account`` on the subparsers object ``sub``."""
    acc = sub.add_parser(
        "account",
        help="epsilon of a composed (Poisson-sub-sampled) Gaussian mechanism",
        description="Compose STEPS runs of the Gaussian mechanism with noise multiplier Z "
        "(Poisson-sub-sampled with rate Q when Q < 1) and report epsilon at DELTA with the RDP "
        "accountant (Balle et al. 2020 conversion) or the PLD accountant. With --group-size K "
        "(RDP accountant only) also the group-privacy bounds for K records: the RDP route "
        "(Lemma 6, orders alpha >= 2^(c+1) only), the (epsilon, delta) route (Lemma 5) and, "
        "for comparison, the RDP route over all orders (not a proven bound).",
    )
    add_options(
        acc,
        "account",
        (
            Use("noise_multiplier", required=True),
            Use(
                "sampling_rate",
                default=1.0,
                help="Poisson sampling rate Q in (0, 1] (default 1: no sub-sampling)",
            ),
            Use("steps", required=True),
            Use("delta", required=True, help="target delta in (0, 1)"),
            "group_size",
            Use("accountant", default="rdp"),
            "json",
            Use("quiet", help="print only epsilon (of the group with --group-size)"),
        ),
    )
    acc.set_defaults(func=cmd_account)
