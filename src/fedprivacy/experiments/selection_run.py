"""One participant-selection run: selection over many rounds and the server-side metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.config import Config
from fedprivacy.config_sections import SecureAggregationSection, SelectionSection
from fedprivacy.errors import ParameterError
from fedprivacy.fl.secure_selection import (
    SecureSelectionConfig,
    SecureSelectionReport,
    run_secure_selection,
)
from fedprivacy.participation.availability import AvailabilityModel, make_availability
from fedprivacy.participation.curve import TWeakCurve, t_weak_curve
from fedprivacy.participation.fairness import check_fairness_rule
from fedprivacy.participation.guard import PrivacyGuard, guard_summary
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.metrics import exposed_users, t_strong
from fedprivacy.participation.selectors import SELECTORS, Selector, make_selector
from fedprivacy.pipeline.selection import run_selection
from fedprivacy.secagg.params import MIN_PARTICIPANTS

MetricsMode = Literal["exact", "bounds", "none"]
METRICS_MODES: tuple[str, ...] = ("exact", "bounds", "none")
# a dense participation matrix of more cells than this is not built for the privacy metric
MAX_DENSE_CELLS = 50_000_000


#: The update length the secure protocol sums when ``dimension`` is not given.
DEFAULT_DIMENSION = 1000


@dataclass(frozen=True)
class SelectionConfig(Config, SecureAggregationSection, SelectionSection):
    """Parameters of one selection run (what ``fedprivacy simulate`` takes).

    The selection and secure aggregation sections' fields are documented in
    :mod:`fedprivacy.config_sections` (``scheme``, ``users``, ``per_round`` and ``rounds`` are
    required here; ``batch_policy = None`` is ``atomic`` for multiround, ``partial`` otherwise).

    Attributes
    ----------
    metrics : str
        The privacy metric: ``exact`` search, fast certified ``bounds``, or ``none``.
    metrics_time_limit, point_time_limit : float
        Seconds for the whole ``T_weak`` curve and for each of its points.
    dimension : int
        Length of the synthetic updates the protocol sums (with ``secagg``).
    """

    # required: field() without a default (a bare annotation would keep the section's default)
    scheme: str = field()
    users: int = field()
    per_round: int = field()
    rounds: int = field()
    metrics: str = "exact"
    metrics_time_limit: float = 60.0
    point_time_limit: float = 2.0
    dimension: int = DEFAULT_DIMENSION

    def secure_config(self) -> SecureSelectionConfig:
        """Protocol settings of a ``--secagg`` run (batch-atomic by default for multiround)."""
        selector = self.selector()
        policy = self.batch_policy or ("atomic" if selector.batched else "partial")
        return SecureSelectionConfig(
            secagg_degree=self.secagg_degree,
            protocol_dropout=self.protocol_dropout,
            batch_policy=policy,
            bits=self.bits,
            update_clip=self.update_clip,
            dimension=self.dimension,
            users_per_batch=selector.unit,  # T, the whole group of a partition, else 1
        )

    def validate(self) -> None:
        """Check every field; raise :class:`ParameterError` naming the first bad one."""
        SELECTORS.lookup(self.scheme)
        require_int("users", self.users, minimum=1)
        require_int("per_round", self.per_round, minimum=1, maximum=self.users)
        require_int("rounds", self.rounds, minimum=1)
        require_int("seed", self.seed, minimum=0)
        self._check_target_privacy()
        if self.fairness and not SELECTORS[self.scheme].batched:
            raise ParameterError("fairness", "applies to the multiround scheme only")
        check_fairness_rule(self.fairness_rule, self.fairness)
        self._check_guard()
        if self.metrics not in METRICS_MODES:
            raise ParameterError("metrics", f"must be one of {', '.join(METRICS_MODES)}")
        if not self.metrics_time_limit > 0 or not self.point_time_limit > 0:
            raise ParameterError("metrics_time_limit", "must be positive")
        if self.metrics != "none" and self.rounds * self.users > MAX_DENSE_CELLS:
            raise ParameterError(
                "metrics",
                f"the privacy metric needs a dense {self.rounds} x {self.users} matrix "
                f"(> {MAX_DENSE_CELLS:,} cells); use --metrics none for runs of this size",
            )
        if self.secagg:
            self.secure_config().validate()
            if self.secagg_degree is not None:
                self.check_secagg_degree(self.per_round)
            if self.per_round < MIN_PARTICIPANTS:
                raise ParameterError(
                    "per_round",
                    f"secure aggregation needs at least {MIN_PARTICIPANTS} users a round",
                )
        elif self.protocol_dropout or self.batch_policy:
            raise ParameterError(
                "secagg", "--protocol-dropout and --batch-policy need --secagg (the real protocol)"
            )
        elif self.dimension != DEFAULT_DIMENSION:
            raise ParameterError("dimension", "is the update length of --secagg; give --secagg")

    @property
    def label(self) -> str:
        """Human-readable name of the scheme (:meth:`Selector.describe`)."""
        return self.selector().describe()


@dataclass
class SelectionResult:
    """What a selection run produced."""

    config: SelectionConfig
    ledger: ParticipationLedger
    dropout: NDArray[np.float64] | None
    fairness_gap: NDArray[np.float64]  # F^(t)
    cardinality: NDArray[np.float64]  # C^(t)
    t_weak: TWeakCurve | None
    t_strong: int | None
    exposed: NDArray[np.intp]
    seconds_selection: float
    seconds_metrics: float
    extra: dict[str, object] = field(default_factory=dict)
    secure: SecureSelectionReport | None = None

    def summary(self) -> dict[str, object]:
        """The JSON object printed by ``fedprivacy simulate --json``."""
        tw: dict[str, object] | None = None
        if self.t_weak is not None:
            final = self.t_weak.final
            if final is None:
                tw = {"lower": None, "upper": None, "exact": True}
            else:
                tw = {
                    "lower": int(self.t_weak.lower[-1]),
                    "upper": int(self.t_weak.upper[-1]),
                    "exact": bool(self.t_weak.lower[-1] == self.t_weak.upper[-1]),
                    "official_rref_upper": final.official_upper,
                    "first_round_exposed": _first_round_at_most(self.t_weak, 1),
                    "curve_exact": self.t_weak.exact,
                }
        return {
            "config": asdict(self.config),
            "rounds": self.ledger.rounds,
            "skipped_rounds": int((self.ledger.cardinalities == 0).sum()),
            "average_cardinality": float(self.cardinality[-1]),
            "fairness_gap": float(self.fairness_gap[-1]),
            "t_weak": tw,
            "t_strong": self.t_strong,
            "exposed_users": None if self.t_weak is None else [int(i) for i in self.exposed],
            "seconds": {
                "selection": round(self.seconds_selection, 3),
                "metrics": round(self.seconds_metrics, 3),
            },
            **self.extra,
        }


def _first_round_at_most(curve: TWeakCurve, value: int) -> int | None:
    hit = np.flatnonzero(curve.upper <= value)
    return int(hit[0]) if hit.size else None


def build(config: SelectionConfig, rng: np.random.Generator) -> tuple[Selector, AvailabilityModel]:
    """The selector and availability model of a configuration."""
    config.validate()
    selector = make_selector(
        config.scheme,
        config.users,
        config.per_round,
        target_privacy=config.target_privacy,
        fairness=config.fairness,
        fairness_rule=config.fairness_rule,
    )
    availability = make_availability(config.users, config.dropout, rng)
    return selector, availability


def _select(
    config: SelectionConfig,
    selector: Selector,
    model: AvailabilityModel,
    ledger: ParticipationLedger,
    after_round: Callable[[int], None],
) -> SecureSelectionReport | None:
    """The rounds' selections into ``ledger``; with ``secagg``, each through the real protocol."""
    rng = np.random.default_rng([config.seed, 1])
    if not config.secagg:
        run_selection(selector, model, config.rounds, rng, ledger=ledger, progress=after_round)
        return None
    _, secure = run_secure_selection(
        selector,
        model,
        config.rounds,
        rng,
        config.secure_config(),
        ledger=ledger,
        progress=after_round,
    )
    return secure


def _server_view(
    config: SelectionConfig,
    ledger: ParticipationLedger,
    progress: Callable[[int], None] | None,
) -> tuple[TWeakCurve | None, int | None, NDArray[np.intp]]:
    """T_weak over the rounds, T_strong and the exposed users (none with ``metrics = none``)."""
    if config.metrics == "none":
        return None, None, np.zeros(0, np.intp)
    p = ledger.matrix()
    curve = t_weak_curve(
        p,
        time_limit=config.metrics_time_limit,
        point_time_limit=config.point_time_limit,
        search_exact=config.metrics == "exact",
        progress=progress,
    )
    return curve, t_strong(p), exposed_users(p)


def run_selection_experiment(
    config: SelectionConfig,
    *,
    availability: AvailabilityModel | None = None,
    progress: Callable[[int], None] | None = None,
    metric_progress: Callable[[int], None] | None = None,
) -> SelectionResult:
    """Run the selection for ``config.rounds`` rounds and compute F, C and the privacy metrics.

    Parameters
    ----------
    config : SelectionConfig
        The run.
    availability : AvailabilityModel, optional
        Overrides the model built from ``config.dropout`` (to share one draw of heterogeneous
        dropout probabilities between schemes).
    progress, metric_progress : callable, optional
        Called with 1 per simulated round / per ``T_weak`` evaluation.
    """
    rng = np.random.default_rng(config.seed)
    selector, built = build(config, rng)
    model = built if availability is None else availability
    if model.num_users != config.users:
        raise ParameterError("availability", f"has {model.num_users} users, config {config.users}")
    ledger = ParticipationLedger(config.users)
    guard = None
    if config.guard is not None:
        target = config.guard_target or 2
        guard = PrivacyGuard(selector, ledger, target=target, mode=config.guard)
        selector = guard
    gap = np.empty(config.rounds)
    freq = ledger.frequency_view

    def after_round(_: int) -> None:
        t = ledger.rounds
        gap[t - 1] = (int(freq.max()) - int(freq.min())) / t
        if progress is not None:
            progress(1)

    started = time.perf_counter()
    secure = _select(config, selector, model, ledger, after_round)
    extra: dict[str, object] = {} if secure is None else {"secagg": secure.summary()}
    seconds_selection = time.perf_counter() - started
    if guard is not None:
        extra["guard"] = guard_summary(guard)
    cardinality = np.cumsum(ledger.cardinalities) / np.arange(1, config.rounds + 1)
    started = time.perf_counter()
    curve, strong, exposed = _server_view(config, ledger, metric_progress)
    dropout = getattr(model, "dropout", None)
    return SelectionResult(
        config,
        ledger,
        None if dropout is None else np.asarray(dropout),
        gap,
        cardinality,
        curve,
        strong,
        exposed,
        seconds_selection,
        time.perf_counter() - started,
        extra,
        secure,
    )
