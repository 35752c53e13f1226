"""The configuration of a ULDP-FL run (``fedprivacy uldp`` and its TOML files).

Hyper-parameters left at ``None`` (``global_lr``, ``local_lr``, ``clip``, ``local_epochs``,
``batch_size``) take the value of :data:`~fedprivacy.uldp.hyper_defaults.DEFAULT_HYPER` for the
dataset and the method's family (:meth:`UldpConfig.resolved`); the searches behind those values
are in :mod:`fedprivacy.uldp.hyper_defaults`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fedprivacy._validation import (
    require_int,
    require_number,
    require_one_of,
    require_positive_number,
)
from fedprivacy.config import Config
from fedprivacy.config_sections import (
    DEFAULT_NOISE_MODE,
    DataSection,
    DPSection,
    LocalTrainingSection,
    SchemeSection,
    SecureAggregationSection,
)
from fedprivacy.crypto.key_size import check_key_bits
from fedprivacy.data.allocators import DISTRIBUTIONS
from fedprivacy.data.tabular import SILO_DATASETS
from fedprivacy.errors import ParameterError
from fedprivacy.fl.gradients import GRADIENTS
from fedprivacy.fl.mechanism import MECHANISMS, Mechanism, make_mechanism
from fedprivacy.participation.canary_selection import canaries_per_round
from fedprivacy.participation.selection_inputs import validate_batch_parameters
from fedprivacy.participation.selectors import SELECTORS, make_selector
from fedprivacy.secagg.params import MIN_PARTICIPANTS
from fedprivacy.uldp.families import check_mechanism, family_for
from fedprivacy.uldp.hyper_defaults import DEFAULT_HYPER, HyperDefaults
from fedprivacy.uldp.method_specs import method_spec

__all__ = ["FIXED_SILOS", "UldpConfig"]

#: Datasets whose silos come with the data, and their number of silos.
FIXED_SILOS: dict[str, int] = {"heart_disease": 4, "tcga_brca": 6}

#: Silos of the pool datasets when ``silos`` is not given (the paper's 5).
DEFAULT_POOL_SILOS = 5

#: User-level sampling rate of the ``-s`` variants when not given (the authors' default).
DEFAULT_SAMPLING_RATE = 0.1


@dataclass(frozen=True)
class UldpConfig(
    Config,
    DPSection,
    SecureAggregationSection,
    LocalTrainingSection,
    SchemeSection,
    DataSection,
):
    """One ULDP-FL run. Every field is also a TOML key; most are ``uldp`` options.

    The data, scheme, local training and DP sections' fields are documented in
    :mod:`fedprivacy.config_sections`; here they mean:

    * ``dataset``: ``heart_disease``, ``tcga_brca``, ``mnist``, ``creditcard`` (a user-supplied
      Kaggle file) or ``creditcard-synthetic`` (the generated stand-in).
    * ``scheme``: how the ``-s`` / ``-ws`` methods choose their users each round: ``poisson``
      (the paper: each user independently with probability ``q``) or a selection scheme of
      :data:`fedprivacy.participation.selectors.SCHEMES` choosing exactly ``per_round`` users
      (default ``round(q |U|)``). The server chooses those, so their epsilon carries no
      amplification by sub-sampling.
    * ``seed``: of the allocation, the initial model, the minibatches, the sampling and the
      noise.
    * ``noise_multiplier``, ``delta``: the paper's sigma (5) and delta (1e-5).
    * ``dp``: the mechanism of ULDP-NAIVE, ULDP-AVG, ULDP-SGD and their variants, with noise
      multiplier ``noise_multiplier`` and clip ``clip``: ``None`` is the paper's
      ``distributed`` (each silo adds its share of the noise); ``central`` has the server add
      it (no guarantee against the server; not ULDP-NAIVE, whose silos add noise at their
      sensitivity). An error for DEFAULT and ULDP-GROUP-k.
    * ``clip``, ``local_epochs``, ``local_lr``, ``batch_size`` (``C``, ``Q``, ``eta_l``,
      ``B``) and ``global_lr``: ``None`` takes the dataset's
      :data:`~fedprivacy.uldp.hyper_defaults.DEFAULT_HYPER`.
    * ``device``: ``cpu`` or ``cuda[:N]``.
    * ``secagg``: the server sums the silos' noised contributions through SecAgg (the registered
      ``secagg`` aggregator, the silos its parties), so that it sees only their sum, which the
      epsilon against the server assumes; otherwise through the ``float`` aggregator, in the
      clear. ``update_clip`` bounds every entry of a contribution for the fixed-point encoding
      (required with ``secagg``; ``None``: no bound, the clear sum only); ``bits`` and
      ``secagg_degree`` as for FedAvg. Silos do not drop out of the protocol
      (``protocol_dropout`` 0): each carries a share of the noise.

    Attributes
    ----------
    method : str
        One of :data:`fedprivacy.uldp.method_names.METHODS`.
    silos : int or None
        Number of silos for the pool datasets (default 5); for Heart Disease (4) and TCGA-BRCA
        (6) the silos are fixed and ``silos`` must be unset or equal.
    distribution : {"uniform", "zipf"}
        Record allocation (Section 5.1).
    sampling_rate : float or None
        User-level Poisson sampling rate ``q`` of the ``-s`` / ``-ws`` methods (default 0.1); an
        error for the other methods.
    global_lr : float or None
        ``eta_g``; ``None`` takes :data:`~fedprivacy.uldp.hyper_defaults.DEFAULT_HYPER`.
    naive_noise : {"corrected", "paper"}
        ULDP-NAIVE's noise (see :mod:`fedprivacy.uldp.methods`).
    user_alpha, silo_alpha, main_silo_share : float
        Zipf exponents (paper 0.5 and 2.0) and the main-silo share of the fixed-silo zipf
        allocation (0.8).
    max_labels_per_user : int or None
        Non-IID MNIST: at most this many labels per user (paper: 2).
    max_rows : int or None
        Rows per vectorised call of the per-user trainer (memory bound); ``None``: 1,024 on a
        CPU, 16,384 on a GPU (:func:`~fedprivacy.fl.local_training.default_max_rows`).
    gradient : {"vmap", "bmm"} or None
        How the per-user trainer differentiates its users
        (:data:`~fedprivacy.fl.gradients.GRADIENTS`); ``None``: ``vmap`` on a CPU, ``bmm`` on a
        GPU (:func:`~fedprivacy.fl.gradients.default_gradient`). The same result to float
        rounding.
    secure_weighting : bool
        Aggregate through the private weighting protocol (Protocol 1; the ``-w`` methods only):
        the server learns only the weighted, noised sum, never the per-user histograms.
    secure_key_bits : int
        Paillier modulus size of that protocol (3072 by default; 2048 warns; below 2048 only
        with ``insecure_test_keys``).
    insecure_test_keys : bool
        Allow ``secure_key_bits < 2048`` (factorable keys: tests and quick checks only).
    creditcard_path : str or None
        Explicit path of the Kaggle ``creditcard.csv``.
    canaries : int
        Canary users beside the ``users`` (ULDP-AVG, ULDP-SGD and their variants, in the
        clear-weighted sums): each, when selected as a user would be (every round, Poisson at
        ``q``, or ``M K / |U|`` a round under a scheme:
        :mod:`fedprivacy.participation.canary_selection`), adds a fixed random direction at the
        clip to one silo's sum; the result's ``epsilon_hat`` (:mod:`fedprivacy.fl.canary_users`).
        0: none.
    """

    dataset: str = "heart_disease"
    scheme: str = "poisson"
    users: int = 100
    rounds: int = 10
    noise_multiplier: float = 5.0
    delta: float = 1e-5
    method: str = "ULDP-AVG"
    silos: int | None = None
    distribution: str = "uniform"
    sampling_rate: float | None = None
    global_lr: float | None = None
    naive_noise: str = "corrected"
    user_alpha: float = 0.5
    silo_alpha: float = 2.0
    main_silo_share: float = 0.8
    max_labels_per_user: int | None = None
    max_rows: int | None = None
    gradient: str | None = None
    update_clip: float | None = None  # type: ignore[assignment]
    secure_weighting: bool = False
    secure_key_bits: int = 3072
    insecure_test_keys: bool = False
    creditcard_path: str | None = field(default=None, compare=False)
    canaries: int = 0

    # -- derived ---------------------------------------------------------------------------

    @property
    def num_silos(self) -> int:
        """The number of silos of the run."""
        if self.dataset in FIXED_SILOS:
            return FIXED_SILOS[self.dataset]
        return self.silos if self.silos is not None else DEFAULT_POOL_SILOS

    @property
    def effective_sampling_rate(self) -> float:
        """``q`` of the ``-s`` methods (default 0.1; ``K / |U|`` for a scheme), else 1."""
        if not method_spec(self.method).sampled:
            return 1.0
        if self.scheme != "poisson":
            return self.effective_per_round / self.users
        return DEFAULT_SAMPLING_RATE if self.sampling_rate is None else float(self.sampling_rate)

    @property
    def effective_per_round(self) -> int:
        """``K`` of a selection scheme: ``per_round``, else ``round(q |U|)`` (at least 1)."""
        if self.per_round is not None:
            return self.per_round
        q = DEFAULT_SAMPLING_RATE if self.sampling_rate is None else float(self.sampling_rate)
        return max(1, round(q * self.users))

    def defaults(self) -> HyperDefaults:
        """The ``DEFAULT_HYPER`` entry of this dataset and method."""
        return DEFAULT_HYPER[self.dataset][method_spec(self.method).family]

    def resolved(self) -> UldpConfig:
        """A copy with every ``None`` hyper-parameter replaced by its default (and ``silos``)."""
        d = self.defaults()
        return replace(
            self,
            silos=self.num_silos,
            clip=d.clip if self.clip is None else self.clip,
            local_epochs=d.local_epochs if self.local_epochs is None else self.local_epochs,
            local_lr=d.local_lr if self.local_lr is None else self.local_lr,
            global_lr=d.global_lr if self.global_lr is None else self.global_lr,
            batch_size=d.batch_size if self.batch_size is None else self.batch_size,
            sampling_rate=(
                self.effective_sampling_rate
                if method_spec(self.method).sampled and self.scheme == "poisson"
                else None
            ),
            per_round=self.effective_per_round if self.scheme != "poisson" else None,
        )

    def mechanism(self) -> Mechanism | None:
        """The mechanism ``dp`` names (``None``: the method's own; needs a resolved ``clip``)."""
        if self.dp is None:
            return None
        return make_mechanism(self.dp, noise_multiplier=self.noise_multiplier, clip=self.clip)

    # -- validation ------------------------------------------------------------------------

    def validate(self) -> UldpConfig:
        """Check every field; return ``self``.

        Raises
        ------
        ParameterError
            Naming the first invalid field; an unknown method or dataset lists the valid names.
        """
        if self.noise_mode != DEFAULT_NOISE_MODE:
            raise ParameterError(
                "noise_mode", "applies to FedAvg's distributed DP (train --dp distributed)"
            )
        require_one_of("dataset", self.dataset, SILO_DATASETS)
        method_spec(self.method)  # lists the names
        require_one_of("distribution", self.distribution, DISTRIBUTIONS)
        require_one_of("naive_noise", self.naive_noise, ("corrected", "paper"))
        require_int("users", self.users, minimum=1)
        require_int("rounds", self.rounds, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("eval_every", self.eval_every, minimum=1)
        if self.max_rows is not None:
            require_int("max_rows", self.max_rows, minimum=1)
        if self.gradient is not None:
            require_one_of("gradient", self.gradient, tuple(GRADIENTS))
        self._validate_secure_weighting()
        self._validate_scheme()
        self._validate_dp()
        self._validate_aggregation()
        self._validate_federation()
        self._validate_canaries()
        require_positive_number("noise_multiplier", self.noise_multiplier)
        delta = require_number("delta", self.delta)
        if not 0.0 < delta < 1.0:
            raise ParameterError("delta", f"must lie in (0, 1), got {delta!r}")
        for name in ("clip", "local_lr", "global_lr"):
            value = getattr(self, name)
            if value is not None:
                require_positive_number(name, value)
        for name in ("local_epochs", "batch_size", "max_labels_per_user"):
            value = getattr(self, name)
            if value is not None:
                require_int(name, value, minimum=1)
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ParameterError("device", f"must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        return self

    def _validate_secure_weighting(self) -> None:
        """Protocol 1's switches and Paillier key, for the weighted methods only."""
        for name in ("secure_weighting", "insecure_test_keys"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, f"must be true or false, got {getattr(self, name)!r}")
        check_key_bits(
            self.secure_key_bits,
            self.insecure_test_keys,
            name="secure_key_bits",
            option="insecure_test_keys (--insecure-test-keys)",
        )
        if self.secure_weighting and not method_spec(self.method).weighted:
            raise ParameterError(
                "secure_weighting",
                "applies to the weighted methods (ULDP-AVG-w, -AVG-ws, -SGD-w, -SGD-ws), "
                f"not {self.method}",
            )

    def _validate_federation(self) -> None:
        """Silos, the user sampling rate and the allocation of records to users and silos."""
        if self.silos is not None:
            require_int("silos", self.silos, minimum=1)
            fixed = FIXED_SILOS.get(self.dataset)
            if fixed is not None and self.silos != fixed:
                raise ParameterError(
                    "silos", f"{self.dataset!r} has {fixed} fixed silos; got {self.silos}"
                )
        if self.sampling_rate is not None:
            if not method_spec(self.method).sampled:
                raise ParameterError(
                    "sampling_rate",
                    f"applies only to the user-sampling methods (-s, -ws), not {self.method}",
                )
            q = require_number("sampling_rate", self.sampling_rate)
            if not 0.0 < q <= 1.0:
                raise ParameterError("sampling_rate", f"must lie in (0, 1], got {q!r}")
        for name in ("user_alpha", "silo_alpha"):
            a = require_number(name, getattr(self, name))
            if a < 0:
                raise ParameterError(name, f"must be >= 0, got {a!r}")
        share = require_number("main_silo_share", self.main_silo_share)
        if not 0.0 <= share <= 1.0:
            raise ParameterError("main_silo_share", f"must lie in [0, 1], got {share!r}")
        if self.max_labels_per_user is not None and self.dataset != "mnist":
            raise ParameterError("max_labels_per_user", "applies to mnist only")

    def _validate_dp(self) -> None:
        """``dp``: a registered mechanism the method can run (:func:`check_mechanism`)."""
        if self.dp is None:
            return
        kind = MECHANISMS.lookup(self.dp)
        if self.dp == "none" and method_spec(self.method).takes_mechanism:
            raise ParameterError("dp", "for training without DP use the DEFAULT method")
        probe = kind.from_options(self.noise_multiplier, 1.0 if self.clip is None else self.clip)
        check_mechanism(self.method, probe, self.secure_weighting)

    def _validate_aggregation(self) -> None:
        """``secagg`` and its protocol's fields (the aggregator across silos)."""
        if not isinstance(self.secagg, bool):
            raise ParameterError("secagg", f"must be true or false, got {self.secagg!r}")
        if self.update_clip is not None:
            require_positive_number("update_clip", self.update_clip)
        require_int("bits", self.bits, minimum=16, maximum=64)
        if self.protocol_dropout != 0:
            raise ParameterError(
                "protocol_dropout", "must be 0: every silo's share of the noise is in the sum"
            )
        if self.batch_policy is not None:
            raise ParameterError("batch_policy", "applies to FedAvg's user batches, not to silos")
        if not self.secagg:
            if self.secagg_degree is not None:
                raise ParameterError("secagg_degree", "needs secure aggregation (--secagg)")
            return
        if self.secure_weighting:
            raise ParameterError(
                "secagg", "the private weighting protocol is the -w methods' secure aggregation"
            )
        if self.update_clip is None:
            raise ParameterError("update_clip", "is required with secagg (the encoding's range)")
        if self.num_silos < MIN_PARTICIPANTS:
            raise ParameterError(
                "silos",
                f"secure aggregation needs at least {MIN_PARTICIPANTS} silos (with two, the sum "
                "and one silo's own contribution give away the other's)",
            )

    def _validate_canaries(self) -> None:
        """Canaries measure a user-level method's noise, in its clear-weighted silo sums."""
        if not require_int("canaries", self.canaries, minimum=0):
            return
        if not family_for(self.method).per_user:
            raise ParameterError(
                "canaries",
                f"measure the user-level methods (ULDP-AVG, ULDP-SGD, ...), not {self.method}",
            )
        if self.secure_weighting:
            raise ParameterError(
                "canaries",
                "join the silos' clear-weighted sums, not the private weighting protocol",
            )
        if method_spec(self.method).sampled and self.scheme != "poisson":
            users = make_selector(
                self.scheme, self.users, self.effective_per_round, self.target_privacy
            )
            canaries_per_round(self.users, users.per_round, self.canaries, users.unit)

    def _validate_scheme(self) -> None:
        """The user selection options: ``scheme``, ``per_round``, ``target_privacy``."""
        require_one_of("scheme", self.scheme, ("poisson", *SELECTORS))
        if self.scheme != "poisson" and not method_spec(self.method).sampled:
            raise ParameterError(
                "scheme",
                f"applies only to the user-sampling methods (-s, -ws), not {self.method}",
            )
        if self.per_round is not None:
            if self.scheme == "poisson":
                raise ParameterError("per_round", "applies to a selection scheme, not poisson")
            require_int("per_round", self.per_round, minimum=1, maximum=self.users)
            if self.sampling_rate is not None:
                raise ParameterError(
                    "per_round", "give per_round or sampling_rate (K = round(q |U|)), not both"
                )
        self._check_target_privacy()
        if self.target_privacy is not None:
            validate_batch_parameters(self.users, self.effective_per_round, self.target_privacy)
