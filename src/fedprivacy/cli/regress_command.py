"""The ``regress`` subcommand: OLS, FGD, NA-FGD, ANA-FGD, DP-SGD and NbAFL on one setting."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fedprivacy.cli.options import (
    Use,
    add_options,
    concept_names,
    config_from_args,
    given_options,
)
from fedprivacy.errors import ParameterError

#: Options of the simulated data only (refused with a real ``--dataset``).
_SIMULATION_ONLY = ("n", "p", "truth", "spread", "noise_sd", "rho", "theta_norm")

#: ``regress``'s options, in the order ``--help`` lists them
_PARSER_OPTIONS = (
    "clients",
    "n",
    "p",
    "epsilon",
    "delta",
    "truth",
    "replications",
    "calibration",
    Use("seed", help="random seed"),
    Use("config", help="TOML file of settings"),
    "json",
    Use("quiet", help="print only the table of estimators"),
    "mechanism",
    "lr",
    "c",
    "iterations",
    "gamma",
    "lr0",
    "spread",
    "noise_sd",
    "rho",
    "theta_norm",
    Use("clip", help="clipping norm C (1)"),
    "neighbouring",
    "estimators",
    "dp_sgd_epochs",
    "dp_sgd_rate",
    "nbafl_rounds",
    "nbafl_local_steps",
    "nbafl_clip",
    "baseline_lr",
    Use(
        "dataset",
        choices=("california", "diabetes"),
        help="real data instead of a simulation (substitutes for the non-public NIO data)",
    ),
    Use("data_dir", help="data directory"),
    "missing",
    "chunk",
)

#: the options that are RegressionConfig fields as given (``--estimators`` is split first)
_FIELDS = concept_names(_PARSER_OPTIONS, without=("config", "json", "quiet", "estimators"))

_LABELS = {
    "ols": "OLS (pooled)",
    "fgd": "FGD",
    "na_fgd": "NA-FGD",
    "ana_fgd": "ANA-FGD",
    "dp_sgd": "DP-SGD (record-level)",
    "nbafl": "NbAFL",
}


def _config(args: argparse.Namespace) -> Any:
    from fedprivacy.regression.config import RegressionConfig

    estimators = None
    if args.estimators is not None:
        estimators = tuple(v.strip() for v in args.estimators.split(",") if v.strip())
    config = config_from_args(RegressionConfig, args, _FIELDS, estimators=estimators)
    given = [f"--{n.replace('_', '-')}" for n in given_options(args, _SIMULATION_ONLY)]
    if config.dataset is not None and given:
        raise ParameterError(
            given[0],
            f"describes the simulated data; {', '.join(given)} mean nothing with --dataset",
        )
    return config.validate()


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def cmd_regress(args: argparse.Namespace) -> int:
    """Run the estimators and print MSE, standard errors and the accountant's epsilon."""
    from fedprivacy.cli.memory import check_memory
    from fedprivacy.data.regression_data import NIO_NOTE
    from fedprivacy.regression.simulation import run_regression

    config = _config(args)
    check_memory("regress", config)
    result = run_regression(config)
    report = result.to_dict()
    if config.dataset is not None:
        report["data_note"] = NIO_NOTE
    if args.json:
        print(json.dumps(report))
        return 0
    if not args.quiet:
        _print_settings(config, result, report)
    _print_table(config, report)
    if not args.quiet:
        for note in report["notes"]:
            print(f"note: {note}")
        print(f"({report['seconds']:.1f} s)")
    sys.stdout.flush()
    return 0


def _print_settings(config: Any, result: Any, report: dict[str, Any]) -> None:
    """The data, the privacy target, the iterations and the learning rates."""
    s = report["settings"]
    if config.dataset is None:
        where = (
            f"simulation: K={s['clients']} clients, n={s['n']}"
            + (f" (spread {s['spread']} sqrt(n))" if config.spread else "")
            + f", p={s['p']}, {s['truth']} theta"
        )
    else:
        where = f"{config.dataset} data: {len(result.sizes)} silos, N={s['total_samples']}"
    print(
        f"fedprivacy regress -- {where}; epsilon={config.epsilon:g}, delta={config.delta:g}, "
        f"{config.mechanism} noise, {config.calibration} calibration"
    )
    print(
        f"T={result.steps} iterations, lr={config.learning_rate:g}"
        + (f" (lr_t = {config.lr0:g} t^-{config.gamma:g})" if config.gamma > 0 else "")
        + (
            f", DP-SGD/NbAFL lr={result.baseline_lr:.3g}"
            if {"dp_sgd", "nbafl"} & set(config.estimators)
            else ""
        )
        + f", B={config.replications} replications, error vs {result.reference}"
    )
    print()


def _print_table(config: Any, report: dict[str, Any]) -> None:
    """Each estimator's MSE, standard error and the accountant's epsilon."""
    print(f"  {'estimator':<24}{'MSE':>12}{'SE':>12}{'epsilon (accountant)':>24}")
    for name in config.estimators:
        eps = report["epsilon"].get(name)
        eps_text = "-" if eps is None else _fmt(eps)
        print(
            f"  {_LABELS[name]:<24}{_fmt(report['mse'][name]):>12}"
            f"{_fmt(report['se'][name]):>12}{eps_text:>24}"
        )


def add_regress_parser(sub: Any) -> None:
    """Register ``fedprivacy regress`` on the subparsers object ``sub``."""
    reg = sub.add_parser(
        "regress",
        help="noise-added federated GD for linear regression (NA-FGD, ANA-FGD, baselines)",
        description="Simulate K clients with n records each (p covariates; sparse or dense "
        "truth) or use real silos (--dataset), and report the MSE over B replications of "
        "pooled OLS, FGD, NA-FGD, ANA-FGD, record-level DP-SGD and NbAFL, their standard "
        "errors, and the RDP accountant's epsilon for the noise each private estimator "
        "actually adds. Options override the keys of --config FILE (TOML).",
    )
    add_options(reg, "regress", _PARSER_OPTIONS)
    reg.set_defaults(func=cmd_regress)
