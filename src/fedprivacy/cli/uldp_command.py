"""The ``uldp`` subcommand: train with a ULDP-FL method, report utility and user-level epsilon."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprivacy.cli.flag_table import FLAGS
from fedprivacy.cli.options import (
    Use,
    add_options,
    concept_names,
    config_from_args,
    given_options,
)
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.method_names import METHODS

if TYPE_CHECKING:
    from fedprivacy.uldp.results import UldpResult

_REQUIRED = ("dataset", "method", "users", "rounds")

#: the options that are not UldpConfig fields
_NOT_FIELDS = ("config", "json", "out", "resume", "stop_after", "quiet")


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-" if value is None or math.isnan(value) else "inf"
    return f"{value:.{digits}g}"


def build_config(args: argparse.Namespace) -> Any:
    """Return the validated :class:`~fedprivacy.uldp.config.UldpConfig` of the arguments.

    ``--config FILE`` is read first; options given on the command line override it.

    Raises
    ------
    ParameterError
        If a required value is missing or a value is invalid.
    """
    from fedprivacy.uldp.config import UldpConfig

    names = concept_names(_OPTIONS, without=_NOT_FIELDS)
    given = given_options(args, names)
    if args.resume is not None:
        return _resumed_config(args, given)
    keys = [k for k in ("secure_key_bits", "insecure_test_keys") if k in given]
    if keys and not given.get("secure_weighting"):
        flag = FLAGS[keys[0]].long
        raise ParameterError(flag, "sets the Paillier key of --secure-weighting; give it too")
    missing = [FLAGS[n].long for n in _REQUIRED if n not in given]
    if args.config is None and missing:
        raise ParameterError(
            missing[0], f"is required (missing: {', '.join(missing)}), or give --config FILE"
        )
    return config_from_args(UldpConfig, args, names).validate()


#: What ``--resume`` may change: how many rounds, where the data are, how it computes.
_RESUME_OPTIONS = ("rounds", "data_dir", "device", "max_rows", "gradient")


def _resumed_config(args: argparse.Namespace, given: dict[str, Any]) -> Any:
    """The configuration stored in ``--resume DIR``, with the options a resume may change."""
    from fedprivacy.uldp.checkpoint import CONFIG
    from fedprivacy.uldp.config import UldpConfig

    if args.config is not None:
        raise ParameterError("resume", "takes the configuration from the run's folder")
    changed = sorted(k for k in given if k not in _RESUME_OPTIONS)
    if changed:
        flags = ", ".join(FLAGS[k].long for k in changed)
        raise ParameterError(
            "resume",
            "only --rounds, --data-dir, --device, --max-rows and --gradient may change, "
            f"not {flags}",
        )
    path = Path(args.resume) / CONFIG
    if not path.is_file():
        raise ParameterError(
            "resume", f"{args.resume} has no {CONFIG}; is it a run's --out folder?"
        )
    return UldpConfig.from_stored_toml(path).with_overrides(**given).validate()


def _progress(enabled: bool, total: int) -> tuple[Any, Any]:
    if not (enabled and sys.stderr.isatty()):
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="rounds", leave=False, file=sys.stderr, dynamic_ncols=True)
    return bar, bar.update


def cmd_uldp(args: argparse.Namespace) -> int:
    """Run one ULDP-FL training and print its utility and user-level epsilon."""
    from fedprivacy.cli.memory import check_memory
    from fedprivacy.uldp.results import round_dict, write_outputs
    from fedprivacy.uldp.run import run_uldp

    config = build_config(args)
    check_memory("uldp", config)
    bar, update = _progress(not args.json and not args.quiet, config.rounds)
    try:
        result = run_uldp(
            config,
            progress=update,
            checkpoint_dir=args.resume or args.out,
            resume=args.resume is not None,
            stop_after_rounds=args.stop_after,
        )
    finally:
        if bar is not None:
            bar.close()
    summary = result.summary()
    out = args.resume or args.out
    if out:
        summary["files"] = [str(p) for p in write_outputs(result, out)]
    if args.json:
        summary["records"] = [round_dict(r) for r in result.records]
        print(json.dumps(summary))
        return 0
    _print_rounds(result)
    _print_privacy(result)
    if out:
        print(f"results in {out}")
    return 0


def _print_rounds(result: UldpResult) -> None:
    """The run's settings and about ten rounds of its records."""
    c = result.config
    print(
        f"{c.method} on {c.dataset}: {c.users} users, {c.num_silos} silos, {c.distribution}, "
        f"{c.rounds} rounds, sigma {c.noise_multiplier:g}, seed {c.seed}"
    )
    print(f"data: {result.data_source}")
    hyper = (
        f"C={_fmt(c.clip)} eta_g={_fmt(c.global_lr)} eta_l={_fmt(c.local_lr)} "
        f"Q={c.local_epochs} B={c.batch_size}"
    )
    if c.sampling_rate is not None:
        hyper += f" q={_fmt(c.sampling_rate)}"
    if result.group_size is not None:
        hyper += f" k={result.group_size}"
    print(f"hyper-parameters: {hyper}")
    name = result.metric_name
    print(f"{'round':>6}  {name:>9}  {'loss':>8}  {'epsilon':>9}  {'seconds':>8}")
    step = max(1, math.ceil(len(result.records) / 10))
    for r in result.records:
        t = r.round_index + 1
        if t % step and t != len(result.records):
            continue
        print(
            f"{t:>6}  {_fmt(r.get('metric')):>9}  {_fmt(r.get('loss')):>8}  "
            f"{_fmt(r.get('epsilon')):>9}  {r.seconds:>8.2f}"
        )


def _aggregation_text(result: UldpResult) -> str:
    """How the server summed the silos, in words."""
    c = result.config
    if c.secure_weighting:
        return "the private weighting protocol (the server sees only the weighted, noised sum)"
    if c.secagg:
        return f"SecAgg between the {c.num_silos} silos (the server sees only their sum)"
    return "in the clear (the server receives every silo's noised contribution)"


def _print_privacy(result: UldpResult) -> None:
    """The final utility, each epsilon with its adversary, the server's view, noise, caveats."""
    from fedprivacy.uldp.results import EPSILON_ADVERSARIES
    from fedprivacy.uldp.run_setup import uldp_hidden

    c, name = result.config, result.metric_name
    report = result.privacy_report()
    eps = report.epsilon_released
    privacy = (
        f"user-level epsilon {_fmt(report.epsilon)} at delta {c.delta:g} (the largest per user)"
        if eps is not None
        else "not private (DEFAULT)"
    )
    print(f"final {name} {_fmt(result.final.get('metric'))}; {privacy}; {result.seconds:.1f} s")
    if eps is not None:
        print(f"  epsilon {_fmt(eps)}: {uldp_hidden(c).caveat}")
        if report.epsilon_server is None:
            print("  no epsilon against the server: it adds the noise to a sum it sees (central)")
        else:
            print(
                f"  epsilon {_fmt(report.epsilon_server)} is against "
                f"{EPSILON_ADVERSARIES['epsilon_server']}"
            )
    hat = result.epsilon_hat
    if hat is not None:
        print(
            f"  epsilon_hat {_fmt(hat['epsilon'])} (95 % interval {_fmt(hat['low'])} to "
            f"{_fmt(hat['high'])}): the empirical epsilon of the final model from "
            f"{hat['canaries']:.0f} canaries, beside the {_fmt(eps)} claimed against its observers"
        )
    view = result.server_view
    if view is not None and view["t_weak"] is not None:
        tw = view["t_weak"]
        t_weak = str(tw["upper"]) if tw["exact"] else f"{tw['lower']}..{tw['upper']}"
        print(
            f"server view (ledger of who each round aggregated): T_weak {t_weak}, T_strong "
            f"{view['t_strong']}, exposed users {view['exposed_users']}"
        )
    print(f"noise: {result.noise_source}")
    print(f"sum over silos: {_aggregation_text(result)}")
    for caveat in result.caveats:
        print(f"caveat: {caveat}")
    if result.secure_weighting is not None:
        sw = result.secure_weighting
        print(
            f"private weighting ({sw['key_bits']}-bit Paillier): max |secure - plaintext| = "
            f"{sw['max_abs_deviation']:.3g} over {sw['rounds']} rounds; effective noise "
            f"multiplier {sw['noise_multiplier_effective']:.12g} (nominal sigma "
            f"{sw['noise_multiplier_nominal']:g}: rounding to the grid counted)"
        )


_DATASETS = ("heart_disease", "tcga_brca", "mnist", "creditcard", "creditcard-synthetic")

#: ``uldp``'s options, in the order ``--help`` lists them.
_OPTIONS: tuple[str | Use, ...] = (
    Use("dataset", choices=_DATASETS, help="dataset (required unless --config)"),
    Use("method", choices=tuple(METHODS), metavar="METHOD", help=f"one of {', '.join(METHODS)}"),
    Use("users", help="number of users |U|"),
    Use("silos", help="silos of MNIST / Creditcard (default 5; fixed for the FLamby datasets)"),
    "distribution",
    "rounds",
    Use("sampling_rate", help="user-level sampling rate of the -s / -ws methods (default 0.1)"),
    Use(
        "scheme",
        choices=("poisson", *(FLAGS["scheme"].choices or ())),
        help="-s / -ws methods: how users are chosen each round: poisson (the paper, rate "
        "--sampling-rate) or a selection scheme choosing K users (multiround: batch "
        "partitioning with -T); a scheme the server runs gets no amplification by sampling",
    ),
    Use("per_round", help="users per round K of --scheme (default round(q |U|))"),
    "target_privacy",
    "seed",
    Use(
        "secagg",
        default=None,
        help="sum the silos' noised contributions with the real SecAgg protocol (needs "
        "--update-clip), so the server sees only their sum",
    ),
    Use("update_clip", help="entry-wise bound of a silo's contribution (the range of --secagg)"),
    "secagg_degree",
    Use("bits", help="fixed-point modulus 2^bits of --secagg"),
    Use(
        "secure_weighting",
        default=None,
        help=FLAGS["secure_weighting"].help + "; --json adds secure_weighting (deviation "
        "from the plaintext aggregate, seconds per phase)",
    ),
    Use(
        "secure_key_bits",
        help="Paillier modulus of --secure-weighting (default 3072; 2048 "
        "warns; smaller only with --insecure-test-keys)",
    ),
    Use("insecure_test_keys", default=None),
    Use("noise_multiplier", help="noise multiplier sigma (default 5)"),
    Use(
        "dp",
        choices=("distributed", "central"),
        help="all but DEFAULT: who adds the noise: distributed (default: the silos) or "
        "central (the server; no guarantee against it; not ULDP-NAIVE or GROUP-k)",
    ),
    "delta",
    "clip",
    Use(
        "canaries",
        help="ULDP-AVG / ULDP-SGD and their variants: add M canary users, selected as users "
        "are, each adding a fixed random direction at the clip to one silo's sum, and report "
        "epsilon_hat, the empirical epsilon of the final model (default 0: none)",
    ),
    Use("local_epochs", help="local epochs Q"),
    Use("local_lr", help="local learning rate eta_l"),
    "global_lr",
    "batch_size",
    "max_labels_per_user",
    "naive_noise",
    "eval_every",
    "max_rows",
    "gradient",
    "device",
    "data_dir",
    "creditcard_path",
    Use("config", help="TOML file with UldpConfig keys; command-line options override it"),
    "json",
    Use(
        "out",
        help="folder for rounds.csv, summary.json, uldp.png and, after every round, checkpoint.pt",
    ),
    Use("resume", help="continue the run in this --out folder, bit for bit (--rounds may grow)"),
    "stop_after",
    Use("quiet", help="no progress bar"),
)


def add_uldp_parser(sub: Any) -> None:
    """Register ``fedprivacy uldp`` on the subparsers object ``sub``."""
    p = sub.add_parser(
        "uldp",
        help="ULDP-FL: federated training with user-level DP across silos",
        description="Train with one of the ULDP-FL methods (Kato et al.) on Heart Disease, "
        "TCGA-BRCA, MNIST or Creditcard, and report the test utility and the user-level "
        "epsilon after every round. Hyper-parameters not given take per-dataset defaults. "
        "Data: --data-dir or $FEDPRIVACY_DATA; the Kaggle creditcard.csv is read from "
        "--creditcard-path or <data-dir>/creditcard/creditcard.csv, and creditcard-synthetic "
        "is a generated stand-in (marked as such in every output).",
    )
    add_options(p, "uldp", _OPTIONS)
    p.set_defaults(func=cmd_uldp)
