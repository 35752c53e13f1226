"""A ULDP-FL method as an algorithm of the round loop, and its user selection.

:class:`UldpAlgorithm` runs one round of a :class:`~fedprivacy.uldp.methods.MethodRunner` for
the users the loop's selector chose, evaluates the global model and records the round;
:func:`uldp_selector` is that selector: every user (the methods without user sampling), Poisson
sampling at rate ``q`` (the ``-s`` / ``-ws`` methods, as in the paper) or a selection scheme that
chooses exactly ``K`` users (Multi-RoundSecAgg's batch partitioning with ``T``, ...).
:func:`server_view` states what the ledger of the run reveals to the server and the per-user
epsilons against it.

Examples
--------
>>> from fedprivacy.uldp.config import UldpConfig
>>> uldp_selector(UldpConfig(method="ULDP-AVG")).name
'all'
>>> uldp_selector(UldpConfig(method="ULDP-AVG-s", sampling_rate=0.2)).rate
0.2
>>> s = uldp_selector(UldpConfig(method="ULDP-AVG-ws", scheme="multiround", per_round=10,
...                              target_privacy=5))
>>> (s.name, s.per_round, s.target_privacy)
('multiround', 10, 5)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from fedprivacy.dp.per_user import per_user_epsilons, spread
from fedprivacy.fl.params import load_flat_
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.exposure import CertificationError
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.sampling import EveryUser, PoissonSampler
from fedprivacy.participation.selectors import make_selector
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult
from fedprivacy.pipeline.loop import UserSampler
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.results import RoundRecord
from fedprivacy.uldp.rounds import RoundOutput

__all__ = ["UldpAlgorithm", "ledger_view", "server_view", "uldp_selector"]

#: Seconds the audit of a ULDP run's ledger may take (``T_weak`` is an interval beyond it).
AUDIT_TIME_LIMIT = 10.0


def uldp_selector(config: UldpConfig) -> UserSampler:
    """The user selection of a (validated) ULDP-FL configuration."""
    if not method_spec(config.method).sampled:
        return EveryUser(config.users)
    if config.scheme == "poisson":
        return PoissonSampler(config.users, config.effective_sampling_rate)
    return make_selector(
        config.scheme, config.users, config.effective_per_round, config.target_privacy
    )


class UldpAlgorithm(Algorithm[RoundRecord]):
    """One ULDP-FL method, round by round, from the users the loop selected.

    Parameters
    ----------
    runner : MethodRunner
        The method on its federation (its rounds, noise and accounting).
    model : torch.nn.Module
        The architecture, to evaluate the global model.
    flat : torch.Tensor
        The initial global model ``x_0``, flattened.
    train_rng, noise_rng : numpy.random.Generator
        Minibatch randomness (the loop's selection draws from ``train_rng`` too, first in
        each round) and the seeded noise of the simulated silos.
    eval_every : int
        Evaluate every this many rounds and after the last round of the run.

    Attributes
    ----------
    flat : torch.Tensor
        The current global model.
    last_output : RoundOutput or None
        The last round's aggregates (pre-noise sum, noisy sum, sample).
    """

    def __init__(
        self,
        runner: MethodRunner,
        model: torch.nn.Module,
        flat: torch.Tensor,
        train_rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        eval_every: int = 1,
    ) -> None:
        self.runner = runner
        self.fed: Federation = runner.fed
        self.num_users = self.fed.num_users
        self.model = model
        self.flat = flat
        self.train_rng = train_rng
        self.noise_rng = noise_rng
        self.eval_every = eval_every
        self.last_output: RoundOutput | None = None

    def evaluate(self) -> dict[str, float]:
        """The task's metrics of the current global model on the pooled test set."""
        load_flat_(self.model, self.flat)
        return self.fed.task.evaluate(self.model, self.fed.test_x, self.fed.test_y)

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """One round of the method for ``ctx.selected``; see the class docstring."""
        runner = self.runner
        sampled = None
        if runner.spec.sampled:
            sampled = np.zeros(self.num_users, dtype=np.bool_)
            sampled[ctx.selected] = True
        out = runner.run_round(self.flat, self.train_rng, self.noise_rng, sampled=sampled)
        self.flat = out.flat
        self.last_output = out
        t = ctx.round_index + 1
        ev: dict[str, float] = {}
        if t % self.eval_every == 0 or ctx.final:
            ev = self.evaluate()
        record = RoundRecord(
            round=t,
            metric=ev.get("metric", math.nan),
            loss=ev.get("loss", math.nan),
            epsilon=runner.epsilon(),
            epsilon_server=runner.epsilon_server(),
            seconds=out.seconds,
            roc_auc=ev.get("roc_auc"),
            clipped_fraction=out.clipped / out.groups if out.groups else math.nan,
        )
        return RoundResult(ctx.selected, record)


def server_view(
    ledger: ParticipationLedger,
    runner: MethodRunner,
    *,
    time_limit: float = AUDIT_TIME_LIMIT,
) -> dict[str, Any]:
    """What the run's ledger reveals, and the per-user epsilons against the server.

    The ledger's audit (:func:`fedprivacy.participation.audit.audit_ledger`, which scales to
    large federations: exposure and ``T_strong`` exact, ``T_weak`` certified within
    ``time_limit``) of the participation matrix in which a row is a round's user sample: the
    server's view when it sees only the sum over silos (the private weighting protocol or secure
    aggregation of the silos' contributions). ``t_weak`` is ``{"lower", "upper", "exact"}``;
    the three figures are ``None`` when even the exact exposure analysis cannot fit in
    ``time_limit``. ``per_user_epsilon`` (``min``/``median``/``max``): for the methods with one
    Gaussian mechanism per round, each user's unsampled Gaussian mechanism composed over the
    rounds it was in; ``None`` for DEFAULT and ULDP-GROUP-k, whose accounting is not per round
    of a user, and for a mechanism whose noise the server adds itself (``central``).
    """
    per_round = runner.family.gaussian_per_round and runner.noise_hidden_from_server
    nm = runner.effective_noise_multiplier if per_round else None
    return ledger_view(ledger, nm, runner.delta, time_limit=time_limit)


def ledger_view(
    ledger: ParticipationLedger,
    noise_multiplier: float | None,
    delta: float,
    *,
    time_limit: float = AUDIT_TIME_LIMIT,
) -> dict[str, Any]:
    """:func:`server_view` from the noise multiplier of one Gaussian mechanism per round.

    ``noise_multiplier`` is ``None`` for the methods whose accounting is not per round of a
    user (no per-user epsilons then).
    """
    per_user: dict[str, float] | None = None
    if noise_multiplier is not None:
        eps = per_user_epsilons(ledger.frequency, noise_multiplier, delta, "rdp")
        per_user = spread(eps)
    view: dict[str, Any] = {
        "t_weak": None,
        "t_strong": None,
        "exposed_users": None,
        "per_user_epsilon": per_user,
    }
    try:
        audit = audit_ledger(ledger, time_limit=time_limit)
    except CertificationError:
        return view
    tw = audit.t_weak
    view["t_weak"] = {"lower": tw.lower, "upper": tw.upper, "exact": tw.exact}
    view["t_strong"] = audit.exposure.t_strong
    view["exposed_users"] = int(audit.exposure.exposed.size)
    return view
