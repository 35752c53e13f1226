"""A training run's configuration (``fedprivacy train``, its TOML files) and what it builds."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedprivacy._validation import require_int, require_one_of, require_positive_number
from fedprivacy.config import Config
from fedprivacy.config_sections import (
    DEFAULT_NOISE_MODE,
    DataSection,
    DPSection,
    LocalTrainingSection,
    SecureAggregationSection,
    SelectionSection,
)
from fedprivacy.data.images import DATASETS, ImageDataset, load_dataset
from fedprivacy.data.partition import PARTITIONS, make_partition
from fedprivacy.dp._checks import require_delta
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import ENCODINGS
from fedprivacy.fl.aggregators import section_aggregator
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.engine import FederatedTraining
from fedprivacy.fl.local_spec import LearningRateSchedule, LocalTrainingSpec
from fedprivacy.fl.mechanism import Mechanism, make_mechanism
from fedprivacy.fl.noise_check import warn_if_swamped
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.models.registry import FEDAVG_MODELS as MODELS
from fedprivacy.models.registry import build_model, count_parameters
from fedprivacy.participation.availability import AvailabilityModel, make_availability
from fedprivacy.participation.canary_selection import CanaryAvailability
from fedprivacy.participation.fairness import check_fairness_rule
from fedprivacy.participation.privacy_filter import check_budget
from fedprivacy.participation.selection_inputs import validate_batch_parameters
from fedprivacy.participation.selectors import SELECTORS
from fedprivacy.secagg.multiround import BatchPolicy
from fedprivacy.secagg.params import MIN_PARTICIPANTS

DEFAULT_MODELS = {"digits": "mlp", "mnist": "mnist-cnn", "cifar10": "lenet", "cifar100": "vgg11"}
METRICS_MODES = ("exact", "bounds", "none")
TRAINERS = ("auto", "vectorised", "loop")
_DEVICE = re.compile(r"cpu|cuda(:[0-9]+)?")
DEFAULT_DELTA = 1e-5
#: The smallest entry-wise update clip: float32 has 24 bits, so an entry below about 1e-7 of a
#: parameter's magnitude is lost when added to it; 1e-6 keeps parameters of size 1 moving.
MIN_UPDATE_CLIP = 1e-6


@dataclass(frozen=True)
class TrainConfig(
    Config,
    DPSection,
    SecureAggregationSection,
    LocalTrainingSection,
    SelectionSection,
    DataSection,
):
    """One federated training run. Every field is also a TOML key and a ``train`` option.

    The defaults are a small run on scikit-learn's bundled digits that needs no download.
    ``to_dict``, ``to_toml``, ``from_mapping`` and ``from_toml`` come from
    :class:`~fedprivacy.config.Config` (``data_dir`` is not written to TOML). The fields of the
    data, selection, local training, secure aggregation and DP sections are documented in
    :mod:`fedprivacy.config_sections`; ``dp = "none"``, ``noise_multiplier``, ``clip`` and
    ``delta`` (default 1e-5) only with a mechanism, ``batch_policy = "atomic"`` under every
    scheme (a partition's group is its batch).

    Attributes
    ----------
    model : str
        A name of :data:`~fedprivacy.models.registry.FEDAVG_MODELS`; ``""`` is the dataset's
        default (:data:`DEFAULT_MODELS`).
    partition : str
        How the records are split over the users (:data:`~fedprivacy.data.partition.PARTITIONS`).
    local_lr_decay, local_lr_milestones : float, tuple of int
        ``local_lr`` is multiplied by ``local_lr_decay`` at each milestone round.
    momentum, weight_decay : float
        Of local SGD.
    beta, shared, shards_per_user
        Parameters of the ``dirichlet``, ``data-sharing`` and ``shards`` partitions.
    checkpoint_every : int
        Rounds between checkpoints of a run directory.
    trainer : str
        ``auto``, ``vectorised`` or ``loop``.
    chunk_size : int or None
        Most clients per vectorised call.
    metrics : str
        ``T_weak``: ``exact``, ``bounds`` or ``none``.
    metrics_time_limit : float
        Seconds for the ``T_weak`` curve.
    encoding : str
        ``fixed-point`` (what SecAgg sums) or ``float`` (plaintext only).
    epsilon_budget : float or None
        With DP: no user's epsilon may pass it; a user (a whole batch under ``multiround``) is
        retired before the round that would (:mod:`fedprivacy.participation.privacy_filter`).
    canaries : int
        With DP, in process: canary users added after the ``users``, selected beside them
        at their rate (``M K / N`` a round, never in their place:
        :mod:`fedprivacy.participation.canary_selection`), sending a fixed random direction at
        the clip; the summary's ``epsilon_hat`` (:mod:`fedprivacy.fl.canary_users`). 0: none.
    """

    dataset: str = "digits"
    per_round: int = 4
    local_epochs: int = 1
    batch_size: int = 20
    local_lr: float = 0.1
    batch_policy: str = "atomic"
    dp: str = "none"
    model: str = ""  # "" = the dataset's default model (DEFAULT_MODELS)
    partition: str = "iid"
    local_lr_decay: float = 1.0
    local_lr_milestones: tuple[int, ...] = ()
    momentum: float = 0.0
    weight_decay: float = 0.0
    beta: float = 0.5
    shared: int = 200
    shards_per_user: int = 1
    checkpoint_every: int = 10
    trainer: str = "auto"
    chunk_size: int | None = None
    metrics: str = "exact"
    metrics_time_limit: float = 60.0
    encoding: str = "fixed-point"
    epsilon_budget: float | None = None
    canaries: int = 0

    @property
    def model_name(self) -> str:
        """The model, with the dataset's default resolved."""
        return self.model or DEFAULT_MODELS.get(self.dataset, "")

    @property
    def label(self) -> str:
        """Human-readable scheme name (:meth:`Selector.describe`, then the protocol's options)."""
        label = self.selector().describe()
        if self.protocol_dropout:
            label += f", {self.protocol_dropout:.0%} drop out in the protocol"
        if self.noise_mode != DEFAULT_NOISE_MODE:
            label += f", {self.noise_mode} noise"
        if self.epsilon_budget is not None:
            label += f", epsilon budget {self.epsilon_budget:g}"
        return label

    def validate(self) -> TrainConfig:
        """Check every field; return ``self``. :class:`ParameterError` names the first bad one."""
        require_one_of("dataset", self.dataset, DATASETS)
        require_one_of("model", self.model_name, MODELS)
        require_one_of("partition", self.partition, PARTITIONS)
        SELECTORS.lookup(self.scheme)
        require_one_of("metrics", self.metrics, METRICS_MODES)
        require_one_of("trainer", self.trainer, TRAINERS)
        require_one_of("batch_policy", self.batch_policy, tuple(p.value for p in BatchPolicy))
        require_one_of("encoding", self.encoding, ENCODINGS)
        if self.encoding == "float" and self.secagg:
            raise ParameterError(
                "encoding", "'float' is plaintext only: the secure path encodes in fixed point"
            )
        if not _DEVICE.fullmatch(str(self.device)):
            raise ParameterError(
                "device", f"must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}"
            )
        users = require_int("users", self.users, minimum=2)
        require_int("per_round", self.per_round, minimum=1, maximum=users)
        require_int("rounds", self.rounds, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("local_epochs", self.local_epochs, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        require_int("shared", self.shared, minimum=0)
        require_int("shards_per_user", self.shards_per_user, minimum=1)
        require_int("bits", self.bits, minimum=16, maximum=64)
        require_int("eval_every", self.eval_every, minimum=1)
        require_int("checkpoint_every", self.checkpoint_every, minimum=1)
        if self.chunk_size is not None:
            require_int("chunk_size", self.chunk_size, minimum=1)
        if self.secagg_degree is not None:
            self.check_secagg_degree(self.per_round)
        if self.secagg and self.per_round < MIN_PARTICIPANTS:
            raise ParameterError(
                "per_round", f"secure aggregation needs at least {MIN_PARTICIPANTS} users a round"
            )
        self._check_target_privacy()
        self._check_guard()
        if self.target_privacy is not None:  # what the batch partitioning needs, before work
            validate_batch_parameters(users, self.per_round, self.target_privacy)
        self._check_optimiser()
        if isinstance(self.dropout, str) and self.dropout != "heterogeneous":
            raise ParameterError(
                "dropout", f"must be 'heterogeneous' or a number in [0, 1), got {self.dropout!r}"
            )
        if not isinstance(self.dropout, str) and not 0.0 <= float(self.dropout) < 1.0:
            raise ParameterError("dropout", f"must lie in [0, 1), got {self.dropout}")
        if not 0.0 <= self.protocol_dropout < 1.0:
            raise ParameterError("protocol_dropout", "must lie in [0, 1)")
        if self.protocol_dropout and not self.secagg:
            raise ParameterError("protocol_dropout", "needs secagg = true (the real protocol)")
        self._require_combinations()
        self._check_dp()
        return self

    def local_spec(self) -> LocalTrainingSpec:
        """Local training's epochs, batch size, learning rate, momentum and weight decay."""
        return LocalTrainingSpec(
            epochs=self.local_epochs,
            batch_size=self.batch_size,
            lr=self.local_lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
        )

    def _check_optimiser(self) -> None:
        """Local SGD's learning rate, its decay and milestones, momentum and weight decay."""
        for name in ("local_lr", "update_clip", "beta", "metrics_time_limit"):
            require_positive_number(name, getattr(self, name))
        if self.update_clip < MIN_UPDATE_CLIP:
            raise ParameterError(
                "update_clip",
                f"{self.update_clip:g} would round every update to nothing: an entry that small "
                f"vanishes when added to a float32 parameter (at least {MIN_UPDATE_CLIP:g})",
            )
        require_positive_number("local_lr_decay", self.local_lr_decay)
        if not 0.0 <= self.momentum < 1.0:
            raise ParameterError("momentum", f"must lie in [0, 1), got {self.momentum}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ParameterError("weight_decay", f"must be >= 0, got {self.weight_decay}")
        for m in self.local_lr_milestones:
            require_int("local_lr_milestones", m, minimum=1)
        if self.local_lr_decay != 1.0 and not self.local_lr_milestones:
            raise ParameterError(
                "local_lr_decay", "needs the rounds at which it applies (--local-lr-milestones)"
            )

    def _check_dp(self) -> None:
        """The mechanism, its delta, the epsilon budget (one round must fit) and the canaries."""
        mechanism = self.mechanism()
        if require_int("canaries", self.canaries, minimum=0):
            if mechanism.noise_multiplier is None:
                raise ParameterError("canaries", "measure a DP mechanism: give --dp")
            self.canary_selection(self.canaries)  # M K / N canaries a round, in whole units
        if self.delta is not None:
            if self.dp == "none":
                raise ParameterError("delta", "needs a DP mechanism (--dp central or distributed)")
            require_delta("delta", self.delta)
        if self.epsilon_budget is not None:
            z, accountant = mechanism.noise_multiplier, mechanism.accountant
            check_budget(self.epsilon_budget, z, self.target_delta, accountant)

    def _require_combinations(self) -> None:
        """Options that only mean something with another one are errors without it."""
        if self.fairness and not SELECTORS[self.scheme].batched:
            raise ParameterError("fairness", "applies to the multiround scheme only")
        check_fairness_rule(self.fairness_rule, self.fairness)
        if not self.secagg:
            if self.mechanism().adds_noise_in_aggregation:
                raise ParameterError(
                    "dp",
                    f"{self.dp}'s noise is added by the parties inside secure aggregation "
                    "(--secagg)",
                )
            if self.secagg_degree is not None:
                raise ParameterError("secagg_degree", "needs secure aggregation (--secagg)")
            if self.batch_policy != "atomic":
                raise ParameterError("batch_policy", "needs secure aggregation (--secagg)")

    def mechanism(self) -> Mechanism:
        """The DP mechanism of the run (validates ``dp``, ``noise_multiplier`` and ``clip``)."""
        return make_mechanism(
            self.dp,
            noise_multiplier=self.noise_multiplier,
            clip=self.clip,
            noise_mode=self.noise_mode,
        )

    @property
    def target_delta(self) -> float:
        """The delta the privacy report states (1e-5 unless set)."""
        return DEFAULT_DELTA if self.delta is None else self.delta

    def to_dict(self) -> dict[str, Any]:
        """TOML-ready mapping (``None`` values left out, tuples as lists, ``model`` resolved)."""
        return {**super().to_dict(), "model": self.model_name}


def build_training(
    config: TrainConfig,
    dataset: ImageDataset | None = None,
    *,
    training_class: type[FederatedTraining] = FederatedTraining,
    availability: AvailabilityModel | None = None,
    **hooks: Any,
) -> FederatedTraining:
    """Assemble data, partition, model, selector, availability and aggregator of ``config``.

    Parameters
    ----------
    config : TrainConfig
        The run (validated here).
    dataset : ImageDataset, optional
        Already loaded data (else loaded from ``config.data_dir`` / ``$FEDPRIVACY_DATA``).
    training_class : type, optional
        :class:`~fedprivacy.fl.engine.FederatedTraining` or a subclass (a deployment's
        :class:`~fedprivacy.flower.fedavg.training.DeployedTraining`).
    availability : AvailabilityModel, optional
        Replaces the availability of ``config.dropout`` (a deployment's live nodes).
    **hooks
        Passed to ``training_class`` (``on_aggregate``, a deployment's transport).
    """
    config.validate()
    data = dataset if dataset is not None else load_dataset(config.dataset, config.data_dir)
    partition = make_partition(
        config.partition,
        data.train_y,
        config.users,
        np.random.default_rng([config.seed, 11]),
        beta=config.beta,
        shared=config.shared,
        shards_per_user=config.shards_per_user,
    )
    model = build_model(config.model_name, data.input_shape, data.num_classes, seed=config.seed)
    selector = config.canary_selection(config.canaries)
    if availability is None:
        availability = make_availability(
            config.users, config.dropout, np.random.default_rng([config.seed, 12])
        )
        if config.canaries:
            availability = CanaryAvailability(availability, config.canaries)
    mechanism = config.mechanism()
    if config.canaries:  # users without data after the partition's
        hooks["canaries"] = CanaryUsers.draw(
            first=config.users,
            count=config.canaries,
            dimension=count_parameters(model),
            clip=1.0 if mechanism.clip is None else mechanism.clip,
            seed=config.seed,
        )
    aggregator = section_aggregator(
        config,
        per_round=config.per_round,  # the users' (the canaries join the sum it releases)
        seed=config.seed,
        party_noise=mechanism.party_noise,
        encoding=config.encoding,
    )
    if isinstance(aggregator, SecureAggregator):
        aggregator.check_dimension(count_parameters(model))
    warn_if_swamped(mechanism, dimension=count_parameters(model), per_round=config.per_round)
    training = training_class(
        model=model,
        spec=config.local_spec(),
        dataset=data,
        partition=partition,
        selector=selector,
        availability=availability,
        aggregator=aggregator,
        schedule=LearningRateSchedule(
            config.local_lr, config.local_lr_decay, tuple(config.local_lr_milestones)
        ),
        seed=config.seed,
        eval_every=config.eval_every,
        trainer=config.trainer,
        chunk_size=config.chunk_size,
        device=config.device,
        mechanism=mechanism,
        delta=config.target_delta,
        **hooks,
    )
    if config.epsilon_budget is not None:
        training.budget_selection(config.epsilon_budget, config.target_delta)
    if config.guard is not None:
        training.guard_selection(config.guard, config.guard_target or 2)
    return training
