"""The pipeline on Flower: a real deployment (SuperLink, SuperNodes, TLS) and Ray simulation.

**Inside any Flower app**: :func:`fedprivacy_mod` is a ClientApp mod around the app's own
``@app.train`` function (:mod:`fedprivacy.flower.dropin.mod`), and :class:`PrivateFedAvg` the server
workflow its ``@app.main()`` runs in place of Flower's ``FedAvg`` (:mod:`fedprivacy.flower.
private_fedavg`, configured by :class:`PrivateFedAvgConfig`): selection, SecAgg, DP, the ledger
and the per-user privacy report for the app's own model. :func:`run_private_fedavg` runs the same
on a PyTorch model and per-user datasets in this process
(:mod:`fedprivacy.flower.dropin.in_process`).

**fedprivacy's own jobs on Flower**: the server runs the pipeline's round loop
(:class:`fedprivacy.flower.fedavg.training.DeployedTraining`: selection, availability, ledger,
privacy report) and sends every stage of a round as messages
(:mod:`fedprivacy.flower.messaging.transport`, :mod:`fedprivacy.flower.messaging.grid`); each node
trains its own data and runs the secure aggregation client (:mod:`fedprivacy.flower.nodes.node`),
its protocol state kept on the node between stages. :mod:`fedprivacy.flower.deploy.apps` is the
Flower App (Message API), :mod:`fedprivacy.flower.deploy.deploy` a local deployment with
``fedprivacy flower deploy``, :mod:`fedprivacy.flower.fedavg.reference` the in-process run a
deployment is compared with, and :mod:`fedprivacy.flower.deploy.tls` its certificates. Importing
this package does not import Flower (``fedprivacy[flower]``); its exports, ``apps``, ``grid`` and
``deploy`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from fedprivacy.flower.dropin.in_process import run_private_fedavg
    from fedprivacy.flower.dropin.mod import fedprivacy_mod
    from fedprivacy.flower.dropin.private_config import PrivateFedAvgConfig
    from fedprivacy.flower.dropin.private_fedavg import PrivateFedAvg
    from fedprivacy.flower.dropin.private_result import PrivateFedAvgResult

_LAZY = {
    "fedprivacy_mod": "fedprivacy.flower.dropin.mod",
    "run_private_fedavg": "fedprivacy.flower.dropin.in_process",
    "PrivateFedAvg": "fedprivacy.flower.dropin.private_fedavg",
    "PrivateFedAvgConfig": "fedprivacy.flower.dropin.private_config",
    "PrivateFedAvgResult": "fedprivacy.flower.dropin.private_result",
}
__all__ = [
    "PrivateFedAvg",
    "PrivateFedAvgConfig",
    "PrivateFedAvgResult",
    "fedprivacy_mod",
    "run_private_fedavg",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
