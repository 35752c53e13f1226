"""The federated training loop: FedAvg with partial participation (Multi-RoundSecAgg, eq. 2).

Each round ``t``::

    availability.sample(t)           -> users reachable in this round
    selector.select(available, f)    -> the users asked (empty: the round is skipped)
    local training (vectorised)      -> one local model per selected user
    aggregator.aggregate(...)        -> the aggregated set and sum_u w_u delta_u / sum_u w_u
    ledger.record(aggregated set)    -> the participation matrix the server observed
    x^(t+1) = x^(t) + mean update    -> evaluation every ``eval_every`` rounds

Skipped rounds count as rounds. Every random choice of round ``t`` comes from a generator seeded by
``(seed, t, purpose)``, so a run resumed from a checkpoint continues bit for bit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy._validation import require_int
from fedprivacy.data.images import ImageDataset
from fedprivacy.data.partition import Partition
from fedprivacy.dp.per_user import epsilons_of_mu2
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import AggregateOutcome, Aggregator
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.clients import LocalClients
from fedprivacy.fl.local_spec import LearningRateSchedule, LocalTrainingSpec
from fedprivacy.fl.mechanism import Mechanism, NoMechanism
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.selection_wrappers import WrappedSelection
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import (
    Selector,
)
from fedprivacy.participation.units import unit_size
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.pipeline.record import RoundRecord

# purposes of the per-round generators
_SELECTION, _BATCHES, _PROTOCOL = 1, 2, 3


def round_rng(seed: int, round_index: int, purpose: int) -> np.random.Generator:
    """The generator of one purpose in one round: independent of everything before it."""
    return np.random.default_rng([seed, round_index, purpose])


@dataclass
class FederatedTraining(WrappedSelection, Algorithm[RoundRecord]):
    """FedAvg with partial participation over a partitioned dataset.

    An :class:`~fedprivacy.pipeline.algorithm.Algorithm`: :meth:`step` and :meth:`run` drive
    the round loop (:class:`~fedprivacy.pipeline.loop.FederatedRun`, availability and
    selection from ``round_rng(seed, t, ...)``), which calls :meth:`run_round`.

    Parameters
    ----------
    model : torch.nn.Module
        The global model (its initial parameters are the starting point).
    spec : LocalTrainingSpec
        Local training (epochs, batch size; its ``lr`` is replaced by ``schedule``).
    dataset : ImageDataset
        Training and test data.
    partition : Partition
        Which training samples each user holds.
    selector : Selector
        The user selection scheme.
    availability : AvailabilityModel
        Which users are reachable in each round.
    aggregator : Aggregator
        Plaintext or secure aggregation.
    schedule : LearningRateSchedule
        Learning rate of each round.
    seed : int
        Seed of every per-round generator.
    eval_every : int
        Evaluate the global model every this many rounds (and after the last).
    trainer : str
        ``"vectorised"`` (clients batched with ``torch.func``), ``"loop"`` (a model copy and an
        optimizer per client, the reference) or ``"auto"``: vectorised for models without
        convolutions, the loop for convolutional models, whose per-client grouped convolutions
        run about 1.5x slower than plain ones on CPU (``benchmarks/training.py``).
    chunk_size : int or None
        Most clients trained in one vectorised call.
    mechanism : Mechanism
        Clipping and noise around aggregation (:mod:`fedprivacy.fl.mechanism`; default none).
    canaries : CanaryUsers, optional
        An audit's canary users after the users (:mod:`fedprivacy.fl.canary_users`).
    delta : float
        The delta of the progress line's epsilon (:meth:`progress_note`; the run's).
    device : str
        ``"cpu"`` or a CUDA device (``"cuda"``, ``"cuda:N"``): where the model, the data and the
        local training live. Aggregation and the ledger stay on the CPU. On a GPU ``"auto"``
        picks the vectorised trainer (cuDNN's grouped convolutions are fast). Runs on different
        devices agree only up to float rounding.
    """

    model: nn.Module
    spec: LocalTrainingSpec
    dataset: ImageDataset
    partition: Partition
    selector: Selector
    availability: AvailabilityModel
    aggregator: Aggregator
    schedule: LearningRateSchedule
    seed: int = 0
    eval_every: int = 1
    trainer: str = "auto"
    chunk_size: int | None = None
    device: str = "cpu"
    on_aggregate: Callable[[int, AggregateOutcome, dict[int, NDArray[np.float32]]], None] | None = (
        None
    )
    mechanism: Mechanism = field(default_factory=NoMechanism)
    canaries: CanaryUsers | None = None
    delta: float = 1e-5

    def __post_init__(self) -> None:
        n = self.num_users = self.selector.num_users
        extra = 0 if self.canaries is None else self.canaries.count  # no data: not partitioned
        if self.partition.num_users + extra != n or self.availability.num_users != n:
            raise ParameterError(
                "users",
                f"selector ({n}), partition ({self.partition.num_users}) and availability "
                f"({self.availability.num_users}) disagree on the number of users",
            )
        require_int("eval_every", self.eval_every, minimum=1)
        self.clients = LocalClients(
            self.model,
            self.spec,
            self.dataset,
            self.partition,
            trainer=self.trainer,
            chunk_size=self.chunk_size,
            device=self.device,
        )
        self.trainer = self.clients.trainer
        self.torch_device = self.clients.torch_device
        # w_u in (0, 1], proportional to n_u (the canaries weigh 1, outside the aggregator)
        self.weights = np.concatenate([self.clients.weights, np.ones(extra)])
        self.global_flat = flatten_parameters(self.model)
        self.ledger = ParticipationLedger(n)
        self.loop: FederatedRun[RoundRecord] = FederatedRun(
            self.selector,
            self.availability,
            self,
            selection_rng=lambda t: round_rng(self.seed, t, _SELECTION),
            ledger=self.ledger,
            live_audit=True,
        )
        self.records: list[RoundRecord] = []
        self._mu2, self._noted = np.zeros(n - extra), 0  # the users' sum z^-2 (progress_note)
        # the unit the secure path aggregates atomically: a batch of T users, or a whole group
        self.batch_size_t = unit_size(self.selector)

    @property
    def device_name(self) -> str:
        """The device in words (``"cpu"`` or the GPU's name)."""
        return self.clients.device_name

    @property
    def authenticated(self) -> bool:
        """Whether a server lying about the SecAgg keys is stopped (always, in this process).

        No server runs apart from the users here; a deployment's
        :class:`~fedprivacy.flower.fedavg.training.DeployedTraining` answers whether its nodes' keys
        are signed.
        """
        return True

    @property
    def round(self) -> int:
        """The index of the next round."""
        return self.ledger.rounds

    def _round_spec(self, round_index: int) -> LocalTrainingSpec:
        """Local training of ``round_index``: the spec with that round's learning rate."""
        return replace(self.spec, lr=self.schedule(round_index))

    def local_updates(
        self, users: NDArray[np.intp], round_index: int, *, seed: int
    ) -> NDArray[np.float32]:
        """The updates ``x_u - x`` that ``users`` would send from the current global model.

        Their batches are drawn with ``round_rng(seed, round_index, ...)`` and the learning rate is
        that of ``round_index``; nothing of the run (model, ledger, records) changes. The attack of
        Appendix G.2 uses this for the ground truth it compares reconstructions with.

        Returns
        -------
        numpy.ndarray
            Float32 ``(len(users), P)`` on the CPU.
        """
        deltas = self.clients.deltas(
            self.global_flat,
            np.asarray(users, dtype=np.intp),
            self._round_spec(round_index),
            round_rng(seed, round_index, _BATCHES),
        )
        return np.asarray(deltas.cpu().numpy())

    def train_and_aggregate(
        self, round_index: int, selected: NDArray[np.intp]
    ) -> tuple[AggregateOutcome, float]:
        """Local training of ``selected``, the mechanism's clipping and the aggregator.

        Here every selected user trains in this process; a deployment
        (:class:`fedprivacy.flower.fedavg.training.DeployedTraining`) overrides this with the users'
        nodes training their own data (:meth:`client_update`) and the protocol on the network.

        Returns
        -------
        tuple of AggregateOutcome and float
            The aggregator's outcome and the seconds of local training.
        """
        r = round_index
        started = time.perf_counter()
        rng = round_rng(self.seed, r, _BATCHES)
        users = selected if self.canaries is None else selected[selected < self.canaries.first]
        trained = self.clients.deltas(self.global_flat, users, self._round_spec(r), rng)
        diff = trained.cpu().numpy()
        deltas = {int(u): diff[i] for i, u in enumerate(users)}
        train_s = time.perf_counter() - started
        deltas, weights = self.mechanism.prepare(
            deltas, {u: float(self.weights[u]) for u in deltas}
        )
        outcome = self.aggregator.aggregate(
            r,
            deltas,
            weights,
            batch_size=self.batch_size_t,
            rng=round_rng(self.seed, r, _PROTOCOL),
        )
        if self.on_aggregate is not None:
            self.on_aggregate(r, outcome, deltas)
        if self.canaries is not None:  # no data to train: each sends its direction, clipped
            outcome = self.canaries.join(outcome, selected, self.mechanism)
        return outcome, train_s

    def client_update(
        self, user: int, selected: Sequence[int], round_index: int
    ) -> tuple[NDArray[np.float32], float]:
        """What ``user`` sends in ``round_index``: its clipped update ``x_u - x`` and weight.

        As :meth:`train_and_aggregate` computes it for that user (the mechanism's clipping
        included).

        The user trains only its own data, from the current global model; its minibatches are
        its block of the round's joint :func:`~fedprivacy.fl.minibatches.client_orders` over
        ``selected`` (which needs only the public partition sizes), with the reference trainer
        (:func:`~fedprivacy.fl.training_loops.train_groups_loop`). So the update equals, bit
        for bit, the one of an in-process run with ``trainer="loop"``.

        Parameters
        ----------
        user : int
            The user (one of ``selected``).
        selected : sequence of int
            The users selected in the round (sorted, as the round loop passes them).
        round_index : int
            The round.

        Returns
        -------
        tuple of numpy.ndarray and float
            The float32 update and its weight ``w_u``.

        Raises
        ------
        ParameterError
            If ``user`` is not among ``selected``.
        """
        rng = round_rng(self.seed, round_index, _BATCHES)
        spec = self._round_spec(round_index)
        local = self.clients.client_update(self.global_flat, user, selected, spec, rng)
        delta = {int(user): local}
        out, weights = self.mechanism.prepare(delta, {int(user): float(self.weights[user])})
        return np.asarray(out[int(user)], dtype=np.float32), float(weights[int(user)])

    def step(self) -> RoundRecord:
        """Run one round (through the round loop) and return its record."""
        return self.loop.step().record

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """One FedAvg round for ``ctx.selected``, called by the round loop.

        Local training (vectorised) -> the mechanism's clipping -> the aggregator -> the
        mechanism's release -> ``x^(t+1) = x^(t) + update``; evaluates every ``eval_every``
        rounds and after the last round of :meth:`run`.
        """
        r, selected = ctx.round_index, ctx.selected
        lr = self.schedule(r)
        train_s = 0.0
        outcome = AggregateOutcome((), None, None, 0.0, 0, 0.0)
        if selected.size:
            outcome, train_s = self.train_and_aggregate(r, selected)
        noise = None
        if outcome.mean_update is not None:
            noise = self.mechanism.accounted_noise(outcome)
            released = self.mechanism.release(outcome.mean_update, len(outcome.aggregated))
            update = torch.from_numpy(released.astype(np.float32)).to(self.torch_device)
            self.global_flat = self.global_flat + update
        accuracy, loss = float("nan"), float("nan")
        if (r + 1) % self.eval_every == 0 or ctx.final:
            accuracy, loss = self.evaluate()
        metrics = {
            "available": float(np.count_nonzero(ctx.available)),
            "lr": lr,
            "test_accuracy": accuracy,
            "test_loss": loss,
            "clipped_entries": float(outcome.clipped_entries),
            "train_seconds": train_s,
            "aggregate_seconds": outcome.seconds,
        }
        wrap = outcome.wrap_log_probability
        record = RoundRecord(
            r,
            tuple(int(u) for u in selected),
            tuple(int(u) for u in outcome.aggregated),
            train_s + outcome.seconds,
            outcome.aborted or "",
            float("nan") if noise is None else noise,
            float("nan") if wrap is None else wrap,
            metrics,
        )
        self.records.append(record)
        return RoundResult(np.asarray(outcome.aggregated, dtype=np.intp), record)

    def run(
        self, rounds: int, *, progress: Callable[[int], None] | None = None
    ) -> list[RoundRecord]:
        """Run until ``rounds`` rounds exist in total; evaluates after the last one.

        What happens after each round beyond the record (checkpoints, files) is a callback of
        the round loop, :attr:`loop` (``loop.callbacks``).
        """
        total = require_int("rounds", rounds, minimum=0)
        self.loop.run(max(0, total - self.round), progress=progress)
        return self.records

    def progress_note(self) -> str:
        """The largest per-user epsilon so far (against the server), for the progress line.

        Each user's ``sum z_t^-2`` over the records seen so far, extended by the new ones (a
        resumed run's records too); the users' only (not the canaries').
        """
        if self.mechanism.noise_multiplier is None:
            return ""
        for record in self.records[self._noted :]:
            users = np.asarray(record.aggregated, dtype=np.intp)
            if users.size and np.isfinite(record.noise_multiplier):
                self._mu2[users[users < self._mu2.size]] += record.noise_multiplier**-2.0
        self._noted = len(self.records)
        most = self._mu2.max(initial=0.0)
        epsilon = float(epsilons_of_mu2([most], self.delta, self.mechanism.accountant)[0])
        return f"max per-user epsilon {epsilon:.3g}"

    def evaluate(self) -> tuple[float, float]:
        """Test accuracy and mean cross-entropy of the current global model."""
        return self.clients.evaluate(self.global_flat)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the run bit for bit."""
        return {
            "round": self.round,
            "global_flat": self.global_flat.detach().cpu().clone(),
            "ledger": [self.ledger.selected(t).tolist() for t in range(self.ledger.rounds)],
            "records": [asdict(r) for r in self.records],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict` (on a freshly built run)."""
        if self.ledger.rounds:
            raise ParameterError("checkpoint", "can only be loaded into a run that has not started")
        flat = state["global_flat"]
        if not isinstance(flat, torch.Tensor) or flat.shape != self.global_flat.shape:
            raise ParameterError("checkpoint", "its model does not match this configuration")
        self.global_flat = flat.clone().to(self.torch_device)
        for row in state["ledger"]:
            self.ledger.record(np.asarray(row, dtype=np.intp))
        self.records = [RoundRecord.restore(r) for r in state["records"]]
        if len(self.records) != self.ledger.rounds or self.ledger.rounds != state["round"]:
            raise ParameterError("checkpoint", "is inconsistent (records and ledger disagree)")


def summarise_records(records: Sequence[RoundRecord]) -> dict[str, float]:
    """Final accuracy and loss (last evaluated round) and mean seconds per round."""
    evaluated = [r for r in records if not np.isnan(r.get("test_accuracy"))]
    last = evaluated[-1] if evaluated else None
    busy = [r for r in records if r.selected]
    return {
        "test_accuracy": float("nan") if last is None else last.get("test_accuracy"),
        "test_loss": float("nan") if last is None else last.get("test_loss"),
        **{
            f"mean_{name}": float(np.mean([r.get(name) for r in busy])) if busy else 0.0
            for name in ("train_seconds", "aggregate_seconds")
        },
    }
