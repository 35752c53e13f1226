"""The ``audit`` subcommand: what a server learned from any FL system's participation log."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.options import Use, add_options
from fedprivacy.errors import FedPrivacyError, ParameterError

if TYPE_CHECKING:
    from fedprivacy.participation.audit import AuditResult
    from fedprivacy.participation.ledger import ParticipationLedger


def _report(args: argparse.Namespace, ledger: ParticipationLedger, audit: AuditResult) -> Any:
    """The ``--json`` object (and ``audit.json``)."""
    result = audit.t_weak
    return {
        "file": str(args.file),
        "rounds": ledger.rounds,
        "users": ledger.num_users,
        "aggregated_users": int((ledger.frequency > 0).sum()),
        "t_weak": {
            **result.to_dict(),
            "rank": None if audit.fast_t_weak else result.rank,
            "method": "fast-bounds" if audit.fast_t_weak else "search",
        },
        "t_strong": audit.exposure.t_strong,
        "exposed_users": [ledger.user_ids[i] for i in audit.exposure.exposed],
        "witness": {
            "z": list(result.witness),
            "support_users": [ledger.user_ids[i] for i in result.support],
        },
    }


def _t_weak_line(audit: AuditResult, time_limit: float) -> str:
    result = audit.t_weak
    if result.exact:
        return (
            f"T_weak = {result.upper}: the smallest number of users in any linear combination "
            "of the aggregates the server saw."
        )
    if audit.fast_t_weak:
        return (
            f"T_weak in [{result.lower}, {result.upper}] (certified bounds; the log is too large "
            f"for the exact T_weak search within --time-limit {time_limit}s)."
        )
    return (
        f"T_weak in [{result.lower}, {result.upper}] (time limit {time_limit}s; raise "
        "--time-limit to narrow it)."
    )


def _findings(report: dict[str, Any], audit: AuditResult, time_limit: float) -> list[str]:
    """T_weak, T_strong and the exposed users, one sentence each (what ``-q`` prints)."""
    if audit.t_weak.upper is None:
        return ["Nobody was ever aggregated: the server has learned nothing."]
    lines = [_t_weak_line(audit, time_limit)]
    official = audit.t_weak.official_upper
    if official is not None and official > audit.t_weak.upper:
        lines.append(f"  (the RREF bound of the paper's code would report {official})")
    lines.append(
        f"T_strong = {report['t_strong']}: the smallest group of users that always "
        "participated together."
    )
    exposed = report["exposed_users"]
    if exposed:
        shown = ", ".join(exposed[:20]) + (" ..." if len(exposed) > 20 else "")
        lines.append(
            f"EXPOSED: {len(exposed)} user(s) whose individual update the server can compute "
            f"exactly: {shown}"
        )
    else:
        lines.append("No user's individual update is a linear combination of the aggregates.")
    return lines


def _text(report: dict[str, Any], audit: AuditResult, findings: list[str]) -> list[str]:
    """The whole human report: the log, the findings, the witness."""
    rank = "" if audit.fast_t_weak else f", rank {audit.t_weak.rank}"
    lines = [
        f"Participation log {report['file']}: {report['rounds']} rounds, {report['users']} users "
        f"({report['aggregated_users']} ever aggregated){rank}",
        *findings,
    ]
    if audit.t_weak.upper is None:
        return lines
    if not report["witness"]["z"]:
        user = report["witness"]["support_users"][0]
        lines.append(
            f"Witness: the exposure analysis certifies that user {user}'s update alone is a "
            "combination of the aggregates (no explicit z within the time limit)."
        )
        return lines
    nonzero = [(r, c) for r, c in enumerate(report["witness"]["z"]) if c != 0]
    shown = ", ".join(f"{c:+d} x round {r}" for r, c in nonzero[:8])
    lines.append(
        f"Witness: {shown}{' ...' if len(nonzero) > 8 else ''} isolates users "
        f"{', '.join(report['witness']['support_users'])}"
    )
    return lines


def cmd_audit(args: argparse.Namespace) -> int:
    """Privacy report for a participation log (printed, and written to ``--out``)."""
    from fedprivacy.participation.audit import audit_ledger
    from fedprivacy.participation.ledger import ParticipationLedger
    from fedprivacy.run_directory import write_run_directory

    if args.follow:
        from fedprivacy.cli.audit_follow import follow_log

        return follow_log(args)
    if args.idle is not None:
        raise ParameterError("idle", "applies only with --follow")
    started = time.perf_counter()
    ledger = ParticipationLedger.from_csv(args.file, time_limit=args.metrics_time_limit)
    budget = args.metrics_time_limit - (time.perf_counter() - started)
    if budget <= 0:
        raise FedPrivacyError(
            f"reading {args.file} used the whole --time-limit {args.metrics_time_limit}s"
        )
    audit = audit_ledger(ledger, time_limit=budget)
    report = _report(args, ledger, audit)
    findings = _findings(report, audit, args.metrics_time_limit)
    text = _text(report, audit, findings)
    if args.out is not None:
        files = {"audit.json": report, "audit.md": "\n".join(text) + "\n"}
        report["files"] = [str(p) for p in write_run_directory(args.out, files)]
    if args.json:
        print(json.dumps(report))
        return 0
    print("\n".join(findings if args.quiet else text))
    if args.out is not None and not args.quiet:
        print(f"results in {args.out}")
    return 0


def add_audit_parser(sub: Any) -> None:
    """Add ``audit`` to the subcommand parser ``sub``."""
    aud = sub.add_parser(
        "audit",
        help="privacy report for a participation log (CSV)",
        description="FILE: a participation log, as a wide CSV (one row per round and one 0/1 "
        "column per user; a header row of user ids is optional) or a long CSV (one 'round,user' "
        "line per participation), optionally gzip-compressed. Reports T_weak with a witness, "
        "T_strong and the users whose individual update the server can compute. With "
        "--follow, FILE may still be growing (a run in progress): a line per round as it "
        "completes (a long log should start with its 'round,user' header).",
    )
    aud.add_argument("file", type=Path, help="participation log (CSV)")
    add_options(
        aud,
        "audit",
        (
            Use(
                "metrics_time_limit",
                default=30.0,
                help="seconds for the whole audit (default 30); exposed users and T_strong are "
                "always exact; the exact T_weak search takes logs of up to 200,000 cells (rounds "
                "x classes of users always aggregated together) per 30 s left, larger logs get "
                "certified bounds; T_weak is an interval when the budget runs out",
            ),
            "follow",
            Use(
                "idle",
                help="with --follow: stop once the log has not grown for this long (default 60; "
                "Ctrl-C also stops)",
            ),
            Use("json", help="print one JSON object (with --follow: one per round)"),
            Use(
                "out",
                help="folder for audit.json and audit.md (with --follow: audit.json "
                "and audit_rounds.csv)",
            ),
            Use("quiet", help="print only T_weak, T_strong and the exposed users"),
        ),
    )
    aud.set_defaults(func=cmd_audit)
