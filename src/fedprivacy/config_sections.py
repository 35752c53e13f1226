"""The sections the configuration classes share: each shared field declared and documented once.

A section is a small frozen dataclass of the fields that mean the same thing in at least two
configurations, under one spelling. A configuration (a :class:`~fedprivacy.config.Config`)
inherits the sections it has; access stays flat (``cfg.noise_multiplier``), and every field is
still one TOML key (a TOML file may group keys in tables of any name, see
:mod:`fedprivacy.config`).

==================================  =========================================================
section                             configurations
==================================  =========================================================
:class:`DataSection`                ``TrainConfig``, ``UldpConfig``, ``RegressionConfig``
:class:`SchemeSection`              ``TrainConfig``, ``SelectionConfig``, ``UldpConfig``
:class:`SelectionSection`           ``TrainConfig``, ``SelectionConfig`` (the scheme's fields,
                                    dropout and fairness)
:class:`LocalTrainingSection`       ``TrainConfig``, ``UldpConfig``
:class:`SecAggProtocolSection`      ``SecureSelectionConfig``
:class:`SecureAggregationSection`   ``TrainConfig``, ``SelectionConfig`` (the protocol's
                                    fields and the ``secagg`` switch)
:class:`DPSection`                  ``TrainConfig``, ``UldpConfig``
==================================  =========================================================

A configuration redeclares a section's field only to give it another default (the defaults
below are ``fedprivacy train``'s where its type allows); where the section's type admits
``None`` and the configuration's does not, the redeclared field narrows the type too. A field a
configuration requires is redeclared as ``name: type = field()``: a bare annotation would keep
the section's default.

A dataclass collects its fields from the last base class to the first, so a configuration lists
its sections last-first: ``class TrainConfig(Config, DPSection, ..., DataSection)`` reads
``dataset`` first, and its own fields come after every section's.

The renamed spellings are refused with the new one named (:data:`RENAMED_KEYS`).

Examples
--------
>>> from dataclasses import dataclass, fields
>>> from fedprivacy.config import Config
>>> @dataclass(frozen=True)
... class Run(Config, DPSection, DataSection):
...     dataset: str = "digits"
...     momentum: float = 0.0
>>> [f.name for f in fields(Run)]
['dataset', 'data_dir', 'dp', 'noise_multiplier', 'clip', 'delta', 'noise_mode', 'momentum']
>>> Run.from_mapping({"noise_multiplier": 1}).noise_multiplier
1.0
>>> Run.from_mapping({"sigma": 1})
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: sigma: is now spelled noise_multiplier
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.participation.selectors import Selector

__all__ = [
    "GUARD_MODES",
    "RENAMED_KEYS",
    "DPSection",
    "DataSection",
    "LocalTrainingSection",
    "SchemeSection",
    "SecAggProtocolSection",
    "SecureAggregationSection",
    "SelectionSection",
]

#: What a guard does with a round that fails its check
#: (:mod:`fedprivacy.participation.guard`, which takes them from here).
GUARD_MODES: Final = ("refuse", "shrink")

#: Old spelling -> the field's spelling now. A configuration that has the new field and not the
#: old one refuses the old key with a :class:`~fedprivacy.errors.ParameterError` naming the new
#: one (``RegressionConfig.lr`` and ``TrainConfig.clip`` are other concepts, and stay).
RENAMED_KEYS: Final[dict[str, str]] = {
    "sigma": "noise_multiplier",  # UldpConfig
    "epochs": "local_epochs",  # TrainConfig
    "lr": "local_lr",  # TrainConfig, InversionStudyConfig
    "lr_decay": "local_lr_decay",  # TrainConfig
    "lr_milestones": "local_lr_milestones",  # TrainConfig
    "degree": "secagg_degree",  # SecureSelectionConfig
    "clip": "update_clip",  # SecureSelectionConfig (the encoding's range)
    "batch_size": "users_per_batch",  # SecureSelectionConfig (users, not records)
    "time_limit": "metrics_time_limit",  # SelectionConfig, DemoConfig
}

#: The fairness rule of a bare ``--fairness`` (equal to
#: :data:`fedprivacy.participation.fairness.DEFAULT_FAIRNESS_RULE`, spelled here so that this
#: module imports nothing).
DEFAULT_FAIRNESS_RULE: Final = "paper"

#: The noise mode of a configuration that names none (a name of
#: :data:`fedprivacy.dp.noise_modes.NOISE_MODES`).
DEFAULT_NOISE_MODE: Final = "over-provisioned"


@dataclass(frozen=True)
class DataSection:
    """Where the records come from.

    Attributes
    ----------
    dataset : str or None
        The dataset's name (each configuration lists its own; ``RegressionConfig``: ``None``
        is a simulation).
    data_dir : str or None
        Data directory (``None``: ``$FEDPRIVACY_DATA``). A path on this machine, not part of
        the run: equality and ``to_toml`` ignore it.
    """

    dataset: str | None = None
    data_dir: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SchemeSection:
    """Who is asked each round: the selection scheme over the users and rounds.

    Attributes
    ----------
    scheme : str
        Participant-selection scheme: ``random``, ``weighted-random``, ``partition`` or
        ``multiround`` (Multi-RoundSecAgg's batch partitioning; ``UldpConfig`` also
        ``poisson``, its default).
    users : int
        Number of users ``N`` (``|U|``).
    per_round : int or None
        Users selected per round ``K`` (``UldpConfig``: ``None`` is ``round(q |U|)``).
    rounds : int
        Number of rounds ``R``.
    seed : int
        Random seed of the run.
    target_privacy : int or None
        ``T``, the batch size of the ``multiround`` scheme (required by it, an error for the
        other schemes).
    """

    scheme: str = "random"
    users: int = 20
    per_round: int | None = None
    rounds: int = 30
    seed: int = 0
    target_privacy: int | None = None

    def _check_target_privacy(self) -> None:
        """``target_privacy``: required by a scheme with batches, an error for the others."""
        from fedprivacy.participation.selectors import SELECTORS

        kind = SELECTORS.get(self.scheme)
        if kind is not None and kind.batched:
            if self.target_privacy is None:
                raise ParameterError("target_privacy", f"is required for the {self.scheme} scheme")
        elif self.target_privacy is not None:
            raise ParameterError(
                "target_privacy", f"only the multiround scheme has batches, not {self.scheme!r}"
            )


@dataclass(frozen=True)
class SelectionSection(SchemeSection):
    """:class:`SchemeSection`, with the users' availability and fair selection.

    Attributes
    ----------
    dropout : str or float
        Each round's dropout before selection: a probability in ``[0, 1)``, or
        ``"heterogeneous"`` (user ``i`` drops with ``p_i`` uniform in ``{0.1, ..., 0.5}``, the
        paper's setting).
    fairness : bool
        Fairness-aware selection (``lambda = 1``) of the ``multiround`` scheme.
    fairness_rule : str
        With ``fairness``: ``paper`` (Algorithm 2 as printed, a row with the least-served user)
        or ``authors`` (the authors' code, the row of least total participation); see
        :data:`~fedprivacy.participation.fairness.FAIRNESS_RULES`.
    guard : str or None
        ``refuse`` or ``shrink`` (:data:`GUARD_MODES`): the scheme runs under
        :class:`~fedprivacy.participation.guard.PrivacyGuard`; None: unguarded.
    guard_target : int or None
        The certified ``T_weak`` the guard keeps (None: 2, nobody exposed).
    """

    dropout: str | float = "heterogeneous"
    fairness: bool = False
    fairness_rule: str = DEFAULT_FAIRNESS_RULE
    guard: str | None = None
    guard_target: int | None = None

    def selector(self) -> Selector:
        """The scheme's selector over these users (checks the scheme, sizes, ``T``, the rule)."""
        from fedprivacy.participation.selectors import make_selector

        assert self.per_round is not None
        return make_selector(
            self.scheme,
            self.users,
            self.per_round,
            self.target_privacy,
            self.fairness,
            self.fairness_rule,
        )

    def canary_selection(self, canaries: int) -> Selector:
        """:meth:`selector`, and ``canaries`` canaries selected beside the users when any.

        A :class:`~fedprivacy.participation.canary_selection.CanarySelection`: the canaries
        under the same scheme, at the users' rate.
        """
        from fedprivacy.participation.canary_selection import canary_selection

        def scheme(users: int, per_round: int) -> Selector:
            return replace(self, users=users, per_round=per_round).selector()

        return canary_selection(self.selector(), canaries, scheme)

    def _check_guard(self) -> None:
        """``guard`` is a mode or None; ``guard_target`` an integer >= 2, only with a guard."""
        if self.guard is not None and self.guard not in GUARD_MODES:
            raise ParameterError("guard", f"must be one of {', '.join(GUARD_MODES)}")
        if self.guard_target is None:
            return
        if isinstance(self.guard_target, bool) or not isinstance(self.guard_target, int):
            raise ParameterError("guard_target", f"must be an integer, got {self.guard_target!r}")
        if self.guard_target < 2:
            raise ParameterError("guard_target", f"must be at least 2, got {self.guard_target}")
        if self.guard is None:
            raise ParameterError("guard_target", "is the target of --guard; give --guard")
        if self.per_round is not None and self.guard_target > self.per_round:
            raise ParameterError(
                "guard_target",
                f"must be at most per_round = {self.per_round}: a round of K users is itself a "
                "sum of K, so every round would be refused",
            )


@dataclass(frozen=True)
class LocalTrainingSection:
    """Each user's local training, and where and how often the model is evaluated.

    Attributes
    ----------
    local_epochs : int or None
        Local epochs (``E``, ``Q``) of each selected user (``UldpConfig``: ``None`` takes the
        method's default).
    batch_size : int or None
        Local mini-batch size ``B``, in records (``UldpConfig``: ``None`` takes the default).
    local_lr : float or None
        Learning rate of local SGD (``eta_l``; ``UldpConfig``: ``None`` takes the default).
    eval_every : int
        Evaluate the global model every this many rounds (and after the last).
    device : str
        ``cpu``, ``cuda`` or ``cuda:N``.
    """

    local_epochs: int | None = None
    batch_size: int | None = None
    local_lr: float | None = None
    eval_every: int = 1
    device: str = "cpu"


@dataclass(frozen=True)
class SecAggProtocolSection:
    """How the real secure aggregation protocol (SecAgg, SecAgg+) runs.

    Attributes
    ----------
    secagg_degree : int or None
        SecAgg+ neighbours of each user (``K - 1``: the complete graph of SecAgg), or ``None`` for
        the default: the complete graph up to 32 users a round, ``O(log K)`` neighbours above
        (:func:`~fedprivacy.secagg.params.round_degree`).
    protocol_dropout : float
        Probability that a selected user drops during the protocol, at a random stage.
    batch_policy : str or None
        What the server aggregates when users drop: ``atomic`` (whole batches only),
        ``round`` (the whole selection or nothing) or ``partial`` (whoever submitted);
        ``None`` (``SelectionConfig``): ``atomic`` for the ``multiround`` scheme, ``partial``
        otherwise.
    bits : int
        Modulus ``2**bits`` of the fixed-point encoding the protocol sums.
    update_clip : float
        Range ``[-update_clip, update_clip]`` of the encoded entries of each update (entries
        beyond it are clipped; not differential privacy's clip).
    """

    secagg_degree: int | None = None
    protocol_dropout: float = 0.0
    batch_policy: str | None = None
    bits: int = 32
    update_clip: float = 1.0

    def check_secagg_degree(self, per_round: int | None) -> None:
        """``secagg_degree``, if given: at least 2, below the ``K = per_round`` of a round.

        Examples
        --------
        >>> SecAggProtocolSection(secagg_degree=1000).check_secagg_degree(4)
        Traceback (most recent call last):
        ...
        fedprivacy.errors.ParameterError: secagg_degree: must be at most per_round - 1 = 3 \
(each party's neighbours among the K of a round), got 1000
        """
        from fedprivacy._validation import require_int
        from fedprivacy.secagg.params import MIN_THRESHOLD

        if self.secagg_degree is None:
            return
        d = require_int("secagg_degree", self.secagg_degree, minimum=MIN_THRESHOLD)
        if per_round is not None and d > per_round - 1:
            raise ParameterError(
                "secagg_degree",
                f"must be at most per_round - 1 = {per_round - 1} (each party's neighbours "
                f"among the K of a round), got {d}",
            )


@dataclass(frozen=True)
class SecureAggregationSection(SecAggProtocolSection):
    """:class:`SecAggProtocolSection`, and whether the run uses the protocol at all.

    Attributes
    ----------
    secagg : bool
        Aggregate with the real protocol every round (else the server sums in the clear).
    """

    secagg: bool = False


@dataclass(frozen=True)
class DPSection:
    """Differential privacy: the mechanism, its noise and clip, and the reported delta.

    Attributes
    ----------
    dp : str or None
        The mechanism, a name of :data:`fedprivacy.fl.mechanism.MECHANISMS`: ``none``,
        ``central`` (the server adds the noise) or ``distributed`` (each party adds its share
        inside secure aggregation); ``UldpConfig``: ``None`` is the method's own.
    noise_multiplier : float or None
        The noise's standard deviation over the clip ``z`` (``sigma`` in the ULDP-FL paper).
    clip : float or None
        L2 bound ``C`` of each (user's) update (``None``: the configuration's default).
    delta : float or None
        The delta of the reported epsilon (``None``: ``1e-5``).
    noise_mode : str
        Distributed DP under dropouts (:mod:`fedprivacy.dp.noise_modes`): ``over-provisioned``
        (each party adds enough for the protocol's threshold) or ``exact`` (each adds removable
        excess; the survivors remove what the sum does not need).
    """

    dp: str | None = None
    noise_multiplier: float | None = None
    clip: float | None = None
    delta: float | None = None
    noise_mode: str = DEFAULT_NOISE_MODE
