"""What a Flower app's server asks of ``PrivateFedAvg``.

:class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg` runs with it.

The configuration is made of the shared sections (:mod:`fedprivacy.config_sections`): the
selection scheme over the nodes and rounds, secure aggregation, DP; the app brings its own
model, data and training. Each field is one TOML key, spelled as in every other configuration
(``per_round``, ``target_privacy``, ``noise_multiplier``, ...).

Examples
--------
>>> config = PrivateFedAvgConfig(users=6, per_round=4, scheme="multiround", target_privacy=2)
>>> config.validate().secagg
True
>>> PrivateFedAvgConfig(users=6, per_round=4, dp="distributed", noise_multiplier=1.0,
...                     secagg=False).validate()
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: dp: distributed's noise is added by the nodes inside secure \
aggregation (secagg = true)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from fedprivacy._validation import require_int, require_positive_number
from fedprivacy.config import Config
from fedprivacy.config_sections import DPSection, SchemeSection, SecureAggregationSection
from fedprivacy.dp._checks import require_delta
from fedprivacy.errors import ParameterError
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.mechanism import Mechanism, make_mechanism
from fedprivacy.flower.dropin.run_config import FLOWER_ROUNDS, as_written, configuration_values
from fedprivacy.participation.canary_selection import canary_selection
from fedprivacy.participation.privacy_filter import check_budget
from fedprivacy.participation.selection_inputs import validate_batch_parameters
from fedprivacy.participation.selectors import SELECTORS, Selector, make_selector
from fedprivacy.secagg.multiround import parse_batch_policy
from fedprivacy.secagg.params import MIN_PARTICIPANTS

__all__ = ["PrivateFedAvgConfig"]

DEFAULT_DELTA = 1e-5


@dataclass(frozen=True)
class PrivateFedAvgConfig(Config, DPSection, SecureAggregationSection, SchemeSection):
    """FedAvg over a Flower app's nodes with selection, SecAgg and DP (see the module docstring).

    ``users`` is the number of nodes the server waits for (each node says which user it is:
    its ``partition-id``); the other fields are documented in :mod:`fedprivacy.config_sections`.

    Attributes
    ----------
    metrics_time_limit : float
        Seconds for ``T_weak`` after each round (the server's view so far).
    overlap_rounds : bool
        Three exchanges a secure round instead of four: round ``t``'s unmasking travels with
        round ``t + 1``'s keys, whose selection is then drawn once round ``t``'s aggregated set
        is fixed (:meth:`~fedprivacy.pipeline.loop.FederatedRun.select_ahead`; not with the
        privacy guard), and the model comes with ``share``.
    epsilon_budget : float or None
        With DP: the server's privacy filter, as ``train --epsilon-budget``: a user (a whole batch
        under ``multiround``) is retired before the round that would take its epsilon past it
        (:mod:`fedprivacy.participation.privacy_filter`). Each node's own budget is its policy's.
    canaries : int
        With DP: canary users beside the ``users``, selected as they are, at their rate
        (:mod:`fedprivacy.participation.canary_selection`); the server joins each selected
        canary's fixed random direction, at the clip, to the sum it unmasks (they have no node)
        and gives the result's ``epsilon_hat`` (:mod:`fedprivacy.fl.canary_users`). 0: none.
    roster : str
        Path of the federation's public keys (a :class:`~fedprivacy.crypto.signing.Roster`
        TOML, from the operator who admits the nodes; ``fedprivacy flower keys`` writes one for
        nodes on this machine): with it every node signs its claim to its user, its SecAgg keys
        and the survivor list of every round (node authentication). Empty: none, and every node
        whose policy does not allow it (``allow_unauthenticated``) refuses the secure rounds.
    """

    users: int = 6
    per_round: int = 4
    rounds: int = 3
    secagg: bool = True
    batch_policy: str = "atomic"
    dp: str = "none"
    metrics_time_limit: float = 5.0
    overlap_rounds: bool = False
    epsilon_budget: float | None = None
    canaries: int = 0
    roster: str = ""

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]) -> PrivateFedAvgConfig:
        """The configuration in a Flower app's run config (``[tool.flwr.app.config]``).

        Its keys are the fields spelled with hyphens (``per-round``, ``target-privacy``,
        ``noise-multiplier``, ``epsilon-budget``, ...), ``num-server-rounds`` (Flower's name)
        for ``rounds``; the app's other keys (its learning rate, ...) are its own and are left
        to it, except one that looks like a typo of fedprivacy's, two keys for one setting or a
        node's policy key (:mod:`fedprivacy.flower.dropin.run_config`). Errors name the keys as
        written.

        Examples
        --------
        >>> cfg = {"num-server-rounds": 2, "users": 6, "per-round": 4, "lr": 0.1}
        >>> c = PrivateFedAvgConfig.from_run_config(cfg)
        >>> c.rounds, c.per_round
        (2, 4)
        >>> PrivateFedAvgConfig.from_run_config({"users": 6, "noise_multiplier": 1.0})
        Traceback (most recent call last):
        ...
        fedprivacy.errors.ParameterError: noise_multiplier: is spelled noise-multiplier in a \
run config
        >>> PrivateFedAvgConfig.from_run_config({"users": 6, "per-rond": 6})
        Traceback (most recent call last):
        ...
        fedprivacy.errors.ParameterError: per-rond: is not a key of PrivateFedAvg; did you mean \
per-round? (the app's own keys are left to the app)
        """
        names = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        names[FLOWER_ROUNDS] = "rounds"
        values = configuration_values(run_config, names)
        try:
            return cls.from_mapping(values).validate()
        except ParameterError as exc:
            raise as_written(exc, names) from None

    def validate(self) -> PrivateFedAvgConfig:
        """Check every field; return ``self``. :class:`ParameterError` names the first bad one."""
        SELECTORS.lookup(self.scheme)
        users = require_int("users", self.users, minimum=2)
        require_int("per_round", self.per_round, minimum=1, maximum=users)
        require_int("rounds", self.rounds, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("bits", self.bits, minimum=16, maximum=64)
        require_positive_number("update_clip", self.update_clip)
        require_positive_number("metrics_time_limit", self.metrics_time_limit)
        parse_batch_policy(self.batch_policy)
        if self.protocol_dropout:
            raise ParameterError(
                "protocol_dropout",
                "simulates dropouts in one process; on Flower the nodes' own dropouts count",
            )
        self._check_target_privacy()
        if self.target_privacy is not None:
            validate_batch_parameters(users, self.per_round, self.target_privacy)
        if self.secagg_degree is not None:
            self.check_secagg_degree(self.per_round)
        if self.secagg and self.per_round < MIN_PARTICIPANTS:
            raise ParameterError(
                "per_round", f"secure aggregation needs at least {MIN_PARTICIPANTS} users a round"
            )
        if self.mechanism().adds_noise_in_aggregation and not self.secagg:
            raise ParameterError(
                "dp",
                f"{self.dp}'s noise is added by the nodes inside secure aggregation "
                "(secagg = true)",
            )
        if self.delta is not None:
            require_delta("delta", self.delta)
        if self.epsilon_budget is not None:
            m = self.mechanism()
            check_budget(self.epsilon_budget, m.noise_multiplier, self.target_delta, m.accountant)
        if require_int("canaries", self.canaries, minimum=0):
            if self.mechanism().noise_multiplier is None:
                raise ParameterError("canaries", "measure a DP mechanism: give dp")
            self.selector()  # M K / N canaries a round, in whole units
        return self

    def canary_users(self, dimension: int) -> CanaryUsers | None:
        """The run's canaries over a model of ``dimension`` parameters (None without)."""
        if not self.canaries:
            return None
        clip = self.mechanism().clip
        return CanaryUsers.draw(
            first=self.users,
            count=self.canaries,
            dimension=dimension,
            clip=1.0 if clip is None else clip,
            seed=self.seed,
        )

    def selector(self) -> Selector:
        """The scheme's selection over the nodes, and the canaries beside them when any."""

        def scheme(users: int, per_round: int) -> Selector:
            return make_selector(self.scheme, users, per_round, self.target_privacy)

        return canary_selection(scheme(self.users, self.per_round), self.canaries, scheme)

    def mechanism(self) -> Mechanism:
        """The DP mechanism (validates ``dp``, ``noise_multiplier`` and ``clip``)."""
        return make_mechanism(
            self.dp or "none",
            noise_multiplier=self.noise_multiplier,
            clip=self.clip,
            noise_mode=self.noise_mode,
        )

    @property
    def target_delta(self) -> float:
        """The delta the privacy report states (1e-5 unless set)."""
        return DEFAULT_DELTA if self.delta is None else self.delta
