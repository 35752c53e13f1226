"""fedprivacy: privacy in federated learning across many rounds, users and silos.

The main nouns are importable from the top level; each is loaded on first use, so ``import
fedprivacy`` (and the command line's start-up) stays light.

>>> import fedprivacy
>>> ledger = fedprivacy.ParticipationLedger(3)
>>> for round_users in ([0, 1], [1, 2], [0, 2]):
...     ledger.record(round_users)
>>> fedprivacy.t_weak(ledger.matrix()).upper  # the server can isolate a single user
1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports
from fedprivacy.errors import FedPrivacyError, ParameterError

if TYPE_CHECKING:
    from fedprivacy.attacks.least_squares import least_squares_reconstruction
    from fedprivacy.dp.accounting import PrivacyAccountant, epsilon_for
    from fedprivacy.dp.per_user import per_user_epsilons
    from fedprivacy.experiments.training_run import run_training
    from fedprivacy.fl.mechanism import make_mechanism
    from fedprivacy.fl.training_config import TrainConfig
    from fedprivacy.participation.audit import audit_ledger
    from fedprivacy.participation.curve import t_weak_curve
    from fedprivacy.participation.ledger import ParticipationLedger
    from fedprivacy.participation.metrics import exposed_users, t_strong
    from fedprivacy.participation.privacy import t_weak
    from fedprivacy.participation.selectors import make_selector
    from fedprivacy.pipeline.algorithm import Algorithm
    from fedprivacy.pipeline.loop import FederatedRun
    from fedprivacy.pipeline.selection import run_selection
    from fedprivacy.report import PrivacyReport, privacy_report

# name -> module that defines it
_LAZY = {
    "ParticipationLedger": "fedprivacy.participation.ledger",
    "make_selector": "fedprivacy.participation.selectors",
    "run_selection": "fedprivacy.pipeline.selection",
    "FederatedRun": "fedprivacy.pipeline.loop",
    "Algorithm": "fedprivacy.pipeline.algorithm",
    "t_weak": "fedprivacy.participation.privacy",
    "t_weak_curve": "fedprivacy.participation.curve",
    "t_strong": "fedprivacy.participation.metrics",
    "exposed_users": "fedprivacy.participation.metrics",
    "audit_ledger": "fedprivacy.participation.audit",
    "least_squares_reconstruction": "fedprivacy.attacks.least_squares",
    "PrivacyAccountant": "fedprivacy.dp.accounting",
    "epsilon_for": "fedprivacy.dp.accounting",
    "per_user_epsilons": "fedprivacy.dp.per_user",
    "make_mechanism": "fedprivacy.fl.mechanism",
    "TrainConfig": "fedprivacy.fl.training_config",
    "run_training": "fedprivacy.experiments.training_run",
    "PrivacyReport": "fedprivacy.report",
    "privacy_report": "fedprivacy.report",
}

__all__ = [
    "FedPrivacyError",
    "ParameterError",
    "__version__",
    "ParticipationLedger",
    "make_selector",
    "run_selection",
    "FederatedRun",
    "Algorithm",
    "t_weak",
    "t_weak_curve",
    "t_strong",
    "exposed_users",
    "audit_ledger",
    "least_squares_reconstruction",
    "PrivacyAccountant",
    "epsilon_for",
    "per_user_epsilons",
    "make_mechanism",
    "TrainConfig",
    "run_training",
    "PrivacyReport",
    "privacy_report",
]
__version__ = "0.1.0"


__getattr__, _dir = lazy_exports(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
