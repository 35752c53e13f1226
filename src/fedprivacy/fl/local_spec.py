"""What local training does: minibatch SGD's hyper-parameters and their learning rate over rounds.

:class:`LocalTrainingSpec` is taken by :class:`~fedprivacy.fl.local_training.VectorisedTrainer`
and its oracles (:mod:`fedprivacy.fl.training_loops`); :func:`require_plain_sgd` is ULDP-FL's
check (its paper's per-user training is plain SGD); :class:`LearningRateSchedule` is FedAvg's
step decay of the local learning rate over rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedprivacy._validation import require_int, require_number
from fedprivacy.errors import ParameterError

__all__ = ["LearningRateSchedule", "LocalTrainingSpec", "require_plain_sgd"]


@dataclass(frozen=True)
class LocalTrainingSpec:
    """Hyper-parameters of local training: minibatch SGD, the one spec of every trainer.

    :class:`VectorisedTrainer` and its oracle
    :func:`~fedprivacy.fl.training_loops.train_groups_loop` take it, for FedAvg's clients
    (cross-entropy) and ULDP-FL's users (the dataset's loss). ULDP-FL runs plain SGD, as its
    paper does: it refuses a non-zero ``momentum`` or ``weight_decay`` (:func:`require_plain_sgd`).

    Parameters
    ----------
    epochs : int
        Local epochs ``E`` (passes over the client's data per round), at least 1.
    batch_size : int
        Minibatch size ``B``, at least 1. The last batch of an epoch may be smaller; it is kept.
    lr : float
        Learning rate, finite and positive.
    momentum : float
        Momentum factor in ``[0, 1)`` as :class:`torch.optim.SGD` defines it (dampening 0, no
        Nesterov); 0 is plain SGD. The momentum buffer starts at zero in every round.
    weight_decay : float
        L2 penalty (added to the gradient as in :class:`torch.optim.SGD`), at least 0.

    Examples
    --------
    >>> spec = LocalTrainingSpec(epochs=2, batch_size=8, lr=0.1)
    >>> spec.validate()
    >>> (spec.epochs, spec.batch_size, spec.lr, spec.momentum)
    (2, 8, 0.1, 0.0)

    """

    epochs: int = 1
    batch_size: int = 50
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0

    def validate(self) -> None:
        """Check every field.

        Raises
        ------
        ParameterError
            If ``epochs < 1``, ``batch_size < 1``, ``lr`` is not a finite positive number,
            ``momentum`` is not in ``[0, 1)`` or ``weight_decay`` is negative or not finite.

        """
        require_int("epochs", self.epochs, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        lr = require_number("lr", self.lr)
        if not lr > 0:
            raise ParameterError("lr", f"must be a finite number > 0, got {self.lr!r}")
        momentum = require_number("momentum", self.momentum)
        if not 0 <= momentum < 1:
            raise ParameterError("momentum", f"must lie in [0, 1), got {self.momentum!r}")
        weight_decay = require_number("weight_decay", self.weight_decay)
        if weight_decay < 0:
            raise ParameterError(
                "weight_decay", f"must be a finite number >= 0, got {self.weight_decay!r}"
            )


def require_plain_sgd(spec: LocalTrainingSpec) -> LocalTrainingSpec:
    """Check ``spec`` for ULDP-FL's per-user training, plain SGD (as the paper); return it.

    Parameters
    ----------
    spec : LocalTrainingSpec
        Local epochs ``Q``, batch size ``B`` and local learning rate ``eta_l``.

    Returns
    -------
    LocalTrainingSpec
        ``spec``.

    Raises
    ------
    ParameterError
        If a field is out of range (:meth:`LocalTrainingSpec.validate`), or ``momentum`` or
        ``weight_decay`` is not 0.

    Examples
    --------
    >>> require_plain_sgd(LocalTrainingSpec(epochs=2, batch_size=8, lr=0.1)).batch_size
    8
    >>> require_plain_sgd(LocalTrainingSpec(momentum=0.9))
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: momentum: must be 0: per-user training is plain SGD, got 0.9
    """
    spec.validate()
    for name in ("momentum", "weight_decay"):
        value = getattr(spec, name)
        if value != 0:
            raise ParameterError(name, f"must be 0: per-user training is plain SGD, got {value!r}")
    return spec


@dataclass(frozen=True)
class LearningRateSchedule:
    """Step decay: ``lr * decay ** (number of milestones <= round)``.

    The paper decays the CIFAR learning rate to ``0.4 lr`` at rounds 400 and 800.
    """

    lr: float
    decay: float = 1.0
    milestones: tuple[int, ...] = ()

    def __call__(self, round_index: int) -> float:
        """The learning rate of ``round_index``."""
        passed = sum(1 for m in self.milestones if round_index >= m)
        return float(self.lr * self.decay**passed)
