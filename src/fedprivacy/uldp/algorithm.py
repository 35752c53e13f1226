"""A ULDP-FL method as an algorithm of the round loop, and its user selection.

:class:`UldpAlgorithm` runs one round for the users the loop's selector chose, evaluates the
global model and records the round; where the silos compute is its one seam, :class:`SiloRounds`
(:class:`SimulatedSilos`: a :class:`~fedprivacy.uldp.methods.MethodRunner` in this process; the
cross-silo deployment's :class:`~fedprivacy.flower.uldp.silo_rounds.ProtocolSilos`: Protocol 1 with
the silos on a transport), so in-process and deployed runs share the round, its accounting and
its record;
:func:`uldp_selector` is that selector: every user (the methods without user sampling), Poisson
sampling at rate ``q`` (the ``-s`` / ``-ws`` methods, as in the paper) or a selection scheme that
chooses exactly ``K`` users (Multi-RoundSecAgg's batch partitioning with ``T``, ...).
:func:`server_view` states what the ledger of the run reveals to the server.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.fl.params import load_flat_
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.canary_selection import CanarySelection, canary_selection
from fedprivacy.participation.exposure import CertificationError
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.sampling import EveryUser, PoissonSampler
from fedprivacy.participation.selectors import Selector, make_selector
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult
from fedprivacy.pipeline.loop import UserSampler
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.uldp.accounting import UldpAccounting
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundOutput
from fedprivacy.uldp.run_setup import sample_hidden

__all__ = [
    "SiloRounds",
    "SimulatedSilos",
    "UldpAlgorithm",
    "server_view",
    "uldp_selector",
]

#: Seconds the audit of a ULDP run's ledger may take (``T_weak`` is an interval beyond it).
AUDIT_TIME_LIMIT = 10.0


def uldp_selector(config: UldpConfig) -> UserSampler:
    """The user selection of a (validated) ULDP-FL configuration, and its canaries' beside it.

    The canaries (``config.canaries``) are selected as the users are, at their rate
    (:mod:`fedprivacy.participation.canary_selection`).
    """
    users = _selection(config, config.users, config.effective_per_round)
    if not config.canaries:
        return users
    if isinstance(users, Selector):  # K a round: M K / |U| canaries, in whole units

        def scheme(count: int, per_round: int) -> Selector:
            return make_selector(config.scheme, count, per_round, config.target_privacy)

        return canary_selection(users, config.canaries, scheme)
    return CanarySelection(users, _selection(config, config.canaries, config.canaries))


def _selection(
    config: UldpConfig, users: int, per_round: int
) -> Selector | EveryUser | PoissonSampler:
    """Every user, Poisson sampling at ``q``, or the scheme's ``per_round`` of ``users``."""
    if not method_spec(config.method).sampled:
        return EveryUser(users)
    if sample_hidden(config):
        return PoissonSampler(users, config.effective_sampling_rate)
    return make_selector(config.scheme, users, per_round, config.target_privacy)


class SiloRounds(Protocol):
    """Where a round's silos compute: in this process, or behind a transport.

    The one seam a deployment swaps (:class:`SimulatedSilos` in process,
    :class:`fedprivacy.flower.uldp.silo_rounds.ProtocolSilos` on a transport); everything else of
    the round (selection, ledger, evaluation, the record) is :class:`UldpAlgorithm`'s.
    """

    aborted: str
    """Why the last round was aborted ('' if it was released)."""

    @property
    def accounting(self) -> UldpAccounting:
        """How the released rounds and the ledger's counts translate into epsilons."""
        ...

    def round(
        self, flat: torch.Tensor, sampled: NDArray[np.bool_] | None, round_index: int
    ) -> RoundOutput | None:
        """Round ``round_index`` from ``x_t = flat``; ``None`` if it was aborted (no release)."""
        ...


@dataclass
class SimulatedSilos:
    """Every silo in this process: a :class:`~fedprivacy.uldp.methods.MethodRunner`'s rounds.

    Attributes
    ----------
    runner : MethodRunner
        The method on its federation (its rounds, noise and accounting).
    train_rng, noise_rng : numpy.random.Generator
        Minibatch randomness (the loop's selection draws from ``train_rng`` too, first in
        each round) and the seeded noise of the simulated silos.
    """

    runner: MethodRunner
    train_rng: np.random.Generator
    noise_rng: np.random.Generator
    aborted: str = field(default="", init=False)  # no silo can fail in process

    @property
    def accounting(self) -> UldpAccounting:
        """The runner's accounting."""
        return self.runner.accounting

    def round(
        self, flat: torch.Tensor, sampled: NDArray[np.bool_] | None, round_index: int
    ) -> RoundOutput | None:
        """The runner's round (never aborted: no silo can fail in process)."""
        return self.runner.run_round(flat, self.train_rng, self.noise_rng, sampled=sampled)


class UldpAlgorithm(Algorithm[RoundRecord]):
    """One ULDP-FL method, round by round, from the users the loop selected.

    Parameters
    ----------
    silos : SiloRounds
        Where the silos compute the round (in process or deployed).
    model : torch.nn.Module
        The architecture, to evaluate the global model.
    flat : torch.Tensor
        The initial global model ``x_0``, flattened.
    evaluate : callable
        ``evaluate(model)``: the task's metrics on the server's test set.
    num_users : int
        ``|U|``.
    canaries : int
        Canary users after them (the loop's selection covers both; the epsilons are the
        users').
    sampled_method : bool
        Whether the method sub-samples users (``-s``): the silos then get the round's sample.
    eval_every : int
        Evaluate every this many rounds and after the last round of the run.

    Attributes
    ----------
    flat : torch.Tensor
        The current global model.
    last_output : RoundOutput or None
        The last released round's aggregates (pre-noise sum, noisy sum, sample).
    released : int
        Rounds released so far (an aborted round releases nothing and costs nothing).
    """

    def __init__(
        self,
        silos: SiloRounds,
        model: torch.nn.Module,
        flat: torch.Tensor,
        evaluate: Callable[[torch.nn.Module], dict[str, float]],
        *,
        num_users: int,
        sampled_method: bool,
        eval_every: int = 1,
        canaries: int = 0,
    ) -> None:
        self.silos = silos
        self.users = num_users
        self.num_users = num_users + canaries  # the loop's
        self.model = model
        self.flat = flat
        self._evaluate = evaluate
        self.sampled_method = sampled_method
        self.eval_every = eval_every
        self.last_output: RoundOutput | None = None
        self.released = 0

    @classmethod
    def simulated(
        cls,
        runner: MethodRunner,
        model: torch.nn.Module,
        flat: torch.Tensor,
        train_rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        eval_every: int = 1,
    ) -> UldpAlgorithm:
        """The method of ``runner`` with every silo in this process (:class:`SimulatedSilos`)."""
        fed = runner.fed
        return cls(
            SimulatedSilos(runner, train_rng, noise_rng),
            model,
            flat,
            lambda m: fed.task.evaluate(m, fed.test_x, fed.test_y),
            num_users=fed.num_users,
            sampled_method=runner.spec.sampled,
            eval_every=eval_every,
            canaries=0 if runner.canaries is None else runner.canaries.count,
        )

    def evaluate(self) -> dict[str, float]:
        """The task's metrics of the current global model on the server's test set."""
        load_flat_(self.model, self.flat)
        return self._evaluate(self.model)

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """One round of the method for ``ctx.selected``; see the class docstring."""
        started = time.perf_counter()
        sampled = None
        if self.sampled_method:
            sampled = np.zeros(self.num_users, dtype=np.bool_)
            sampled[ctx.selected] = True
        out = self.silos.round(self.flat, sampled, ctx.round_index)
        seconds = time.perf_counter() - started
        aggregated = np.asarray(ctx.selected, dtype=np.intp)
        if out is None:
            aggregated = np.zeros(0, dtype=np.intp)
        else:
            self.flat = out.flat
            self.last_output = out
            self.released += 1
        t = ctx.round_index + 1
        ev: dict[str, float] = {}
        if t % self.eval_every == 0 or ctx.final:
            ev = self.evaluate()
        epsilon, epsilon_server = self._epsilons(ctx, aggregated)
        groups = 0 if out is None else out.groups
        clipped = out.clipped / groups if out is not None and groups else math.nan
        metrics = {
            "epsilon": epsilon,
            "epsilon_server": epsilon_server,
            "clipped_fraction": clipped,
        }
        metrics.update(ev)
        record = RoundRecord(
            ctx.round_index,
            tuple(int(u) for u in ctx.selected),
            tuple(int(u) for u in aggregated),
            seconds,
            "" if out is not None else self.silos.aborted,
            self._round_noise(out),
            metrics=metrics,
        )
        return RoundResult(aggregated, record)

    def _epsilons(self, ctx: RoundContext, aggregated: NDArray[np.intp]) -> tuple[float, float]:
        """The accounting's epsilons of the ledger as it is with this round recorded."""
        if ctx.frequency is None:
            raise ParameterError("frequency", "a ULDP round is accounted from a loop's ledger")
        frequency = ctx.frequency.copy()
        frequency[aggregated] += 1
        return self.silos.accounting.epsilons(self.released, frequency[: self.users])

    def _round_noise(self, out: RoundOutput | None) -> float:
        """The noise multiplier a released round's Gaussian is accounted at (NaN: none)."""
        z = self.silos.accounting.noise_multiplier
        return math.nan if out is None or z is None else z


def server_view(
    ledger: ParticipationLedger, *, time_limit: float = AUDIT_TIME_LIMIT
) -> dict[str, Any]:
    """What the run's ledger reveals to the server.

    The ledger's audit (:func:`fedprivacy.participation.audit.audit_ledger`, which scales to
    large federations: exposure and ``T_strong`` exact, ``T_weak`` certified within
    ``time_limit``) of the participation matrix in which a row is a round's user sample: the
    server's view when it sees only the sum over silos (the private weighting protocol or secure
    aggregation of the silos' contributions). ``t_weak`` is ``{"lower", "upper", "exact"}``;
    the three figures are ``None`` when even the exact exposure analysis cannot fit in
    ``time_limit``. The per-user epsilons against the server are the report's, from the same
    ledger (:func:`fedprivacy.report.privacy_report`).
    """
    view: dict[str, Any] = {"t_weak": None, "t_strong": None, "exposed_users": None}
    try:
        audit = audit_ledger(ledger, time_limit=time_limit)
    except CertificationError:
        return view
    tw = audit.t_weak
    view["t_weak"] = {"lower": tw.lower, "upper": tw.upper, "exact": tw.exact}
    view["t_strong"] = audit.exposure.t_strong
    view["exposed_users"] = int(audit.exposure.exposed.size)
    return view
