"""User-level differential privacy in cross-silo federated learning (ULDP-FL).

One user's records may sit in several silos. :mod:`fedprivacy.data.allocators` links every
training record to a silo and a user (Section 5.1 of Kato et al., ULDP-FL); the resulting
:class:`~fedprivacy.data.allocation.Allocation` gives per-silo, per-user views of the records
(and :mod:`fedprivacy.data.shards` the per-silo training data grouped by user). The main nouns
load on first use (their modules import torch):

>>> from fedprivacy.uldp import METHODS, UldpConfig
>>> UldpConfig(method="ULDP-AVG-ws").validate().method in METHODS
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from fedprivacy.uldp.algorithm import UldpAlgorithm, uldp_selector
    from fedprivacy.uldp.config import UldpConfig
    from fedprivacy.uldp.families import FAMILIES, MethodFamily
    from fedprivacy.uldp.method_names import METHODS
    from fedprivacy.uldp.methods import MethodRunner
    from fedprivacy.uldp.results import UldpResult
    from fedprivacy.uldp.run import run_uldp

_LAZY = {
    "UldpAlgorithm": "fedprivacy.uldp.algorithm",
    "uldp_selector": "fedprivacy.uldp.algorithm",
    "UldpConfig": "fedprivacy.uldp.config",
    "FAMILIES": "fedprivacy.uldp.families",
    "MethodFamily": "fedprivacy.uldp.families",
    "METHODS": "fedprivacy.uldp.method_names",
    "MethodRunner": "fedprivacy.uldp.methods",
    "UldpResult": "fedprivacy.uldp.results",
    "run_uldp": "fedprivacy.uldp.run",
}
__all__ = [
    "FAMILIES",
    "METHODS",
    "MethodFamily",
    "MethodRunner",
    "UldpAlgorithm",
    "UldpConfig",
    "UldpResult",
    "run_uldp",
    "uldp_selector",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
