"""The flag table: every concept of the ``fedprivacy`` command line, spelled once.

A command's parser is generated from it (:func:`fedprivacy.cli.options.add_options`), and
``docs/cli.md``'s flag table is generated from it too, so the two cannot drift.
``tests/cli/test_vocabulary.py`` walks every parser: a short letter means one concept, a concept
has one spelling, and every option a command accepts is read.

Examples
--------
>>> FLAGS["users"].spellings()
('--users', '-N')
>>> FLAGS["noise_multiplier"].spellings()
('--noise-multiplier', '-z')
>>> [r.old for r in RENAMED["uldp"]][:2]
['-U', '--sigma']
"""

from __future__ import annotations

from pathlib import Path

from fedprivacy.cli.flags import (
    DEFAULT_FAIRNESS_RULE,
    Either,
    dropout,
    positive_seconds,
    run_directory,
)
from fedprivacy.cli.vocabulary import Flag, Renamed

__all__ = ["FLAGS", "RENAMED", "THEMES"]

_POPULATION = (
    Flag("--users", "number of users N", short="-N", type=int),
    Flag("--per-round", "users selected per round K", short="-K", type=int),
    Flag(
        "--target-privacy",
        "target privacy T of --scheme multiround: users per batch (must divide N and K)",
        short="-T",
        type=int,
    ),
    Flag("--rounds", "number of rounds R", short="-R", type=int),
    Flag(
        "--scheme",
        "participant-selection scheme",
        choices=("random", "weighted-random", "partition", "multiround"),
    ),
    Flag(
        "--dropout",
        "per-round dropout probability, or 'heterogeneous' (p_i uniform in {0.1,...,0.5})",
        type=dropout,
    ),
    Flag(
        "--fairness",
        "fairness-aware multiround (lambda = 1), by RULE: 'paper' (default: Algorithm 2, a row "
        "with the least-served user) or 'authors' (the authors' code: the row of least total "
        "participation)",
        nargs="?",
        const=DEFAULT_FAIRNESS_RULE,
        metavar="RULE",
    ),
    Flag(
        "--guard",
        "refuse (skip) or shrink (by whole users or batches) every round that would expose a "
        "user or take the certified T_weak below --guard-target",
        choices=("refuse", "shrink"),
    ),
    Flag(
        "--guard-target",
        "with --guard: the certified T_weak every round keeps (default 2: nobody exposed)",
        type=int,
    ),
    Flag(
        "--epsilon-budget",
        "with --dp: retire a user (a whole batch under multiround) before the round that would "
        "take its epsilon past this budget",
        type=float,
    ),
    Flag(
        "--canaries",
        "with --dp: add M canary users (each sends a fixed random direction at the clip) and "
        "report epsilon_hat, the empirical epsilon of the final model (default 0: none)",
        type=int,
    ),
    Flag("--seed", "random seed (default 0)", type=int),
    Flag("--silos", "number of silos", short="-S", type=int),
    Flag("--distribution", "records per user (default uniform)", choices=("uniform", "zipf")),
    Flag("--sampling-rate", "Poisson sampling rate q in (0, 1]", type=float),
    Flag("--dataset", "dataset"),
    Flag("--method", "ULDP-FL method"),
    Flag("--model", "mlp, mnist-cnn, lenet, vgg11 (default: the dataset's)"),
    Flag("--partition", "iid, shards, dirichlet, data-sharing"),
    Flag("--beta", "Dirichlet concentration (partition dirichlet)", type=float),
    Flag("--shared", "globally shared samples (partition data-sharing)", type=int),
    Flag(
        "--max-labels-per-user",
        "non-IID MNIST: at most this many labels per user (paper: 2)",
        type=int,
    ),
)

_METRICS = (
    Flag(
        "--metrics",
        "privacy metric: exact search, fast certified bounds, or none (for very large runs)",
        choices=("exact", "bounds", "none"),
    ),
    Flag(
        "--time-limit",
        "seconds for the privacy metric T_weak",
        dest="metrics_time_limit",
        type=positive_seconds,
        metavar="SECONDS",
    ),
    Flag(
        "--follow",
        "read a log that is still being written: the server's view after every round",
        action="store_true",
    ),
    Flag(
        "--idle",
        "with --follow: stop once the log has not grown for this long",
        type=positive_seconds,
        metavar="SECONDS",
    ),
    Flag(
        "--stage-timeout",
        "seconds a protocol stage waits for replies",
        type=positive_seconds,
        metavar="SECONDS",
    ),
)

_SECURE_AGGREGATION = (
    Flag("--secagg", "aggregate with the real SecAgg protocol", action="store_true"),
    Flag("--dimension", "update length with --secagg (default 1000)", type=int),
    Flag(
        "--protocol-dropout",
        "with --secagg: probability that a selected user drops during the protocol, at a "
        "random stage (default 0)",
        type=float,
    ),
    Flag(
        "--batch-policy",
        "with --secagg: aggregate only whole batches (atomic, default for multiround), the "
        "whole selection or nothing (round), or whoever submitted (partial, default otherwise)",
        choices=("atomic", "round", "partial"),
    ),
    Flag(
        "--secagg-degree",
        "SecAgg+ neighbours of each party (default: the complete graph up to 32 parties a round, "
        "O(log K) neighbours above; K - 1: always complete)",
        type=int,
    ),
    Flag("--update-clip", "entry-wise clip of an update (the fixed-point range)", type=float),
    Flag("--bits", "fixed-point modulus 2^bits of the aggregation", type=int),
    Flag(
        "--encoding",
        "fixed-point (default; what SecAgg sums) or float (plaintext only)",
        choices=("fixed-point", "float"),
    ),
    Flag(
        "--secure-weighting",
        "-w methods: aggregate through the private weighting protocol (Paillier, Protocol 1)",
        action="store_true",
    ),
    Flag("--secure-key-bits", "Paillier modulus of --secure-weighting (default 3072)", type=int),
    Flag(
        "--insecure-test-keys",
        "allow --secure-key-bits below 2048 (factorable keys: tests only)",
        action="store_true",
    ),
)

_DP = (
    Flag("--dp", "who adds the noise", choices=("none", "central", "distributed")),
    Flag(
        "--noise-multiplier",
        "noise multiplier z: noise std / sensitivity",
        short="-z",
        type=float,
    ),
    Flag("--clip", "clipping bound C: the L2 bound of each update", short="-C", type=float),
    Flag("--delta", "delta of epsilon (default 1e-5)", type=float),
    Flag(
        "--noise-mode",
        "with --dp distributed: over-provisioned (default; each party adds enough for the "
        "protocol's threshold) or exact (each adds removable excess; the survivors remove what "
        "the sum does not need, so it holds exactly the target whoever dropped)",
        choices=("over-provisioned", "exact"),
    ),
    Flag("--epsilon", "privacy budget epsilon", type=float),
    Flag(
        "--naive-noise",
        "ULDP-NAIVE noise: sensitivity 2|S|C (default) or the paper's |S|C",
        choices=("corrected", "paper"),
    ),
    Flag("--steps", "number of compositions", type=int),
    Flag("--group-size", "group-privacy bound for K records", short="-k", type=int),
    Flag("--accountant", "RDP (default) or PLD", choices=("rdp", "pld")),
)

_TRAINING = (
    Flag("--epochs", "local epochs E", short="-E", dest="local_epochs", type=int),
    Flag("--local-lr", "local learning rate", type=float),
    Flag("--local-lr-decay", "factor of the local learning rate at each milestone", type=float),
    Flag("--local-lr-milestones", "comma-separated rounds where the local learning rate decays"),
    Flag("--global-lr", "global learning rate eta_g", type=float),
    Flag("--batch-size", "local mini-batch size B", short="-B", type=int),
    Flag("--momentum", "momentum of local SGD", type=float),
    Flag("--eval-every", "evaluate every this many rounds", type=int),
    Flag("--checkpoint-every", "checkpoint every this many rounds", type=int),
    Flag(
        "--trainer",
        "auto (default: loop for CNNs on CPU), vectorised or loop",
        choices=("auto", "vectorised", "loop"),
    ),
    Flag("--chunk-size", "most clients per vectorised call", type=int),
    Flag("--device", "cpu (default), cuda or cuda:N"),
    Flag(
        "--max-rows",
        "rows per vectorised per-user training call (memory bound; default 1024 on a CPU, "
        "16384 on a GPU)",
        type=int,
    ),
    Flag(
        "--gradient",
        "how per-user training differentiates its users: vmap (default on a CPU) or bmm "
        "(batched matrix products; default on a GPU)",
        choices=("vmap", "bmm"),
    ),
)

_REGRESSION = (
    Flag("--clients", "number of clients K", type=int),
    Flag("--n", "local sample size n (mean)", type=int),
    Flag("--p", "dimension p", type=int),
    Flag("--truth", "true theta (sparse)", choices=("sparse", "dense")),
    Flag("--replications", "replications B", type=int),
    Flag(
        "--calibration",
        "NA-FGD and NbAFL noise: the RDP accountant's, which delivers --epsilon (default), or "
        "the paper's formulas (DP-SGD always uses the accountant, as Opacus)",
        choices=("accountant", "paper"),
    ),
    Flag("--mechanism", "noise (gaussian)", choices=("gaussian", "laplace")),
    Flag("--lr", "learning rate alpha of gradient descent", type=float),
    Flag("--c", "T = c N^(3/4) / alpha (0.25)", type=float),
    Flag("--iterations", "gradient-descent iterations T (overrides --c)", type=int),
    Flag("--gamma", "lr_t = lr0 t^-gamma", type=float),
    Flag("--lr0", "initial diminishing rate (1)", type=float),
    Flag("--spread", "n_k ~ N(n, (spread sqrt(n))^2) (0)", type=float),
    Flag("--noise-sd", "error sd (0.5)", type=float),
    Flag("--rho", "AR(1) covariate correlation", type=float),
    Flag("--theta-norm", "||theta|| (1)", type=float),
    Flag(
        "--neighbouring",
        "neighbouring datasets of the DP guarantee",
        choices=("add-remove", "replace"),
    ),
    Flag("--estimators", "comma list of ols,fgd,na_fgd,ana_fgd,dp_sgd,nbafl"),
    Flag("--dp-sgd-epochs", "DP-SGD epochs (5)", type=float),
    Flag("--dp-sgd-rate", "DP-SGD sampling rate", type=float),
    Flag("--nbafl-rounds", "NbAFL rounds", type=int),
    Flag("--nbafl-local-steps", "NbAFL local steps per round", type=int),
    Flag("--nbafl-clip", "NbAFL clipping norm", type=float),
    Flag("--baseline-lr", "DP-SGD / NbAFL learning rate", type=float),
    Flag("--missing", "missing values of --dataset", choices=("impute", "drop")),
    Flag("--chunk", "replications per batch", type=int),
)

_EXPERIMENTS = (
    Flag("--seeds", "comma-separated seeds (default 0)"),
    Flag("--only", "comma-separated run names"),
    Flag("--t0", "attack experiments: first round", type=int),
    Flag("--window", "attack experiments: rounds", type=int),
    Flag(
        "--set",
        "override a configuration key of every run (repeatable)",
        action="append",
        metavar="KEY=VALUE",
    ),
    Flag("--print-config", "print the runs' TOML and exit", action="store_true"),
)

_DEPLOYMENT = (
    Flag(
        "--tls",
        "TLS between every process (default; --no-tls: plaintext gRPC)",
        action=Either,
        default=True,
    ),
    Flag(
        "--node-auth",
        "SuperNode authentication and signed node identities (default: on, off with --simulation)",
        action=Either,
    ),
    Flag(
        "--simulation",
        "run the same app with flwr run on Flower's simulation runtime (Ray) instead",
        action="store_true",
    ),
    Flag(
        "--overlap-rounds",
        "three exchanges a secure round instead of four: round t's unmasking travels with "
        "round t+1's keys, and the model with share",
        action="store_true",
    ),
    Flag(
        "--key-rounds",
        "each node masks up to N secure rounds with one pair of SecAgg keys (its policy's "
        "key_rounds; 1: fresh keys every round): the server skips advertise for the nodes "
        "whose keys it holds",
        type=int,
        default=1,
        metavar="N",
    ),
    Flag(
        "--kill",
        "fault injection: kill party P's SuperNode (*: the last party asked) before STAGE of "
        "round R",
        metavar="P@R:STAGE",
    ),
    Flag(
        "--replay",
        "fault injection: party P (*: the first party asked) replays a message in round R "
        "(repeatable)",
        action="append",
        metavar="P@R",
    ),
    Flag(
        "--bad-share",
        "fault injection: user U's node (*: the first user asked) sends wrong unmasking shares "
        "in round R (repeatable); the server names it and still unmasks the sum",
        action="append",
        metavar="U@R",
    ),
    Flag(
        "--forge",
        "fault injection, a lying server: parameters it proposes instead of the "
        "configuration's; every party must refuse them",
        metavar="NAME=VALUE,...",
        default="",
    ),
    Flag(
        "--rerun",
        "fault injection: once the run ends, run the same app again on the same SuperNodes "
        "(OUT/rerun); every node refuses what it answered in the first run",
        action="store_true",
    ),
)

_FILES = (
    Flag("--config", "a TOML file of the command's configuration keys", type=Path),
    Flag("--data-dir", "data folder (else $FEDPRIVACY_DATA)", metavar="DIR"),
    Flag("--creditcard-path", "the Kaggle creditcard.csv", metavar="FILE"),
    Flag("--out", "run directory", type=run_directory, metavar="DIR"),
    Flag("--resume", "continue the run in this --out folder", type=Path, metavar="DIR"),
    Flag("--stop-after", "stop once this many rounds exist (checkpointed)", type=int),
    Flag("--json", "print one JSON object", action="store_true"),
    Flag("--quiet", "no progress bars or progress lines", short="-q", action="store_true"),
)

#: theme -> the concepts of that theme (docs/cli.md's flag table groups them so)
THEMES: dict[str, tuple[Flag, ...]] = {
    "population and selection": _POPULATION,
    "privacy metrics and time": _METRICS,
    "secure aggregation": _SECURE_AGGREGATION,
    "differential privacy": _DP,
    "training": _TRAINING,
    "regression": _REGRESSION,
    "experiments": _EXPERIMENTS,
    "deployment": _DEPLOYMENT,
    "files and output": _FILES,
}

#: concept name (the option's ``dest``) -> its flag
FLAGS: dict[str, Flag] = {flag.name: flag for flags in THEMES.values() for flag in flags}

_OLD_ULDP = (
    Renamed("-U", "users"),
    Renamed("--sigma", "noise_multiplier"),
    Renamed("--insecure", "tls", value=False, new="--no-tls"),
)

#: command -> the spellings of older releases it still accepts (for one release, with a warning)
RENAMED: dict[str, tuple[Renamed, ...]] = {
    "uldp": (
        *_OLD_ULDP[:2],
        Renamed("--local-epochs", "local_epochs"),
        Renamed("-Q", "local_epochs"),
        Renamed("--key-bits", "secure_key_bits"),
    ),
    "train": (
        Renamed("--lr", "local_lr"),
        Renamed("--lr-decay", "local_lr_decay"),
        Renamed("--lr-milestones", "local_lr_milestones"),
        Renamed("--metrics-time-limit", "metrics_time_limit"),
    ),
    "account": (Renamed("-T", "steps"),),
    "regress": (
        Renamed("-K", "clients"),
        Renamed("-T", "iterations"),
        Renamed("-B", "replications"),
    ),
    "flower deploy": (
        Renamed("--supernodes", "users"),
        Renamed("--kill-supernode", "kill"),
        _OLD_ULDP[2],
    ),
    "flower cross-silo": (*_OLD_ULDP, Renamed("--kill-silo", "kill")),
}
