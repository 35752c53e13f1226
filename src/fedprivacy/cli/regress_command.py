"""The ``regress`` subcommand: OLS, FGD, NA-FGD, ANA-FGD, DP-SGD and NbAFL on one setting."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fedprivacy.errors import ParameterError

#: Options of the simulated data only (refused with a real ``--dataset``).
_SIMULATION_ONLY = ("n", "p", "truth", "spread", "noise_sd", "rho", "theta_norm")

_OPTIONS = (
    "clients",
    "n",
    "p",
    "epsilon",
    "delta",
    "truth",
    "replications",
    "calibration",
    "seed",
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
    "clip",
    "neighbouring",
    "dp_sgd_epochs",
    "dp_sgd_rate",
    "nbafl_rounds",
    "nbafl_local_steps",
    "nbafl_clip",
    "baseline_lr",
    "dataset",
    "data_dir",
    "missing",
    "chunk",
)

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

    base = RegressionConfig.from_toml(args.config) if args.config else RegressionConfig()
    changes = {name: getattr(args, name) for name in _OPTIONS}
    if (changes["dataset"] or base.dataset) is not None:
        given = [f"--{n.replace('_', '-')}" for n in _SIMULATION_ONLY if changes[n] is not None]
        if given:
            raise ParameterError(
                given[0],
                f"describes the simulated data; {', '.join(given)} mean nothing with --dataset",
            )
    if changes["data_dir"] is not None:
        changes["data_dir"] = str(changes["data_dir"])
    if args.estimators is not None:
        changes["estimators"] = tuple(v.strip() for v in args.estimators.split(",") if v.strip())
    return base.with_overrides(**changes).validate()


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
    print(f"  {'estimator':<24}{'MSE':>12}{'SE':>12}{'epsilon (accountant)':>24}")
    for name in config.estimators:
        eps = report["epsilon"].get(name)
        eps_text = "-" if eps is None else _fmt(eps)
        print(
            f"  {_LABELS[name]:<24}{_fmt(report['mse'][name]):>12}"
            f"{_fmt(report['se'][name]):>12}{eps_text:>24}"
        )
    for note in report["notes"]:
        print(f"note: {note}")
    print(f"({report['seconds']:.1f} s)")
    sys.stdout.flush()
    return 0


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
    reg.add_argument("--clients", "-K", type=int, default=None, help="number of clients K")
    reg.add_argument("--n", type=int, default=None, help="local sample size n (mean)")
    reg.add_argument("--p", type=int, default=None, help="dimension p")
    reg.add_argument("--epsilon", type=float, default=None, help="privacy budget epsilon")
    reg.add_argument("--delta", type=float, default=None, help="delta (default 1e-5)")
    reg.add_argument(
        "--truth", choices=["sparse", "dense"], default=None, help="true theta (sparse)"
    )
    reg.add_argument("--replications", "-B", type=int, default=None, help="replications B")
    reg.add_argument(
        "--calibration",
        choices=["paper", "accountant"],
        default=None,
        help="NA-FGD and NbAFL noise: the paper's formulas (default) or the RDP accountant "
        "(DP-SGD always uses the accountant, as Opacus)",
    )
    reg.add_argument("--seed", type=int, default=None, help="random seed")
    reg.add_argument("--config", type=Path, default=None, help="TOML file of settings")
    reg.add_argument("--json", action="store_true", help="print one JSON object")
    reg.add_argument(
        "--mechanism", choices=["gaussian", "laplace"], default=None, help="noise (gaussian)"
    )
    reg.add_argument("--lr", type=float, default=None, help="learning rate alpha")
    reg.add_argument("--c", type=float, default=None, help="T = c N^(3/4) / alpha (0.25)")
    reg.add_argument("--iterations", "-T", type=int, default=None, help="override T")
    reg.add_argument("--gamma", type=float, default=None, help="lr_t = lr0 t^-gamma")
    reg.add_argument("--lr0", type=float, default=None, help="initial diminishing rate (1)")
    reg.add_argument(
        "--spread", type=float, default=None, help="n_k ~ N(n, (spread sqrt(n))^2) (0)"
    )
    reg.add_argument("--noise-sd", type=float, default=None, help="error sd (0.5)")
    reg.add_argument("--rho", type=float, default=None, help="AR(1) covariate correlation")
    reg.add_argument("--theta-norm", type=float, default=None, help="||theta|| (1)")
    reg.add_argument("--clip", type=float, default=None, help="clipping norm C (1)")
    reg.add_argument(
        "--neighbouring",
        choices=["add-remove", "replace"],
        default=None,
        help="neighbouring datasets of the DP guarantee",
    )
    reg.add_argument(
        "--estimators", default=None, help="comma list of ols,fgd,na_fgd,ana_fgd,dp_sgd,nbafl"
    )
    reg.add_argument("--dp-sgd-epochs", type=float, default=None, help="DP-SGD epochs (5)")
    reg.add_argument("--dp-sgd-rate", type=float, default=None, help="DP-SGD sampling rate")
    reg.add_argument("--nbafl-rounds", type=int, default=None, help="NbAFL rounds")
    reg.add_argument(
        "--nbafl-local-steps", type=int, default=None, help="NbAFL local steps per round"
    )
    reg.add_argument("--nbafl-clip", type=float, default=None, help="NbAFL clipping norm")
    reg.add_argument("--baseline-lr", type=float, default=None, help="DP-SGD / NbAFL learning rate")
    reg.add_argument(
        "--dataset",
        choices=["california", "diabetes"],
        default=None,
        help="real data instead of a simulation (substitutes for the non-public NIO data)",
    )
    reg.add_argument("--data-dir", type=Path, default=None, help="data directory")
    reg.add_argument(
        "--missing", choices=["impute", "drop"], default=None, help="missing values of --dataset"
    )
    reg.add_argument("--chunk", type=int, default=None, help="replications per batch")
    reg.set_defaults(func=cmd_regress)
