"""Checkpoints of a ULDP-FL run, so that ``fedprivacy uldp --resume`` continues it bit for bit.

A run's randomness comes from two generators shared by all its rounds (the sample and minibatch
keys, and the noise; :func:`fedprivacy.uldp.run_setup.run_seeds`), so a checkpoint holds their
exact states beside the model, the ledger of user samples (from which the epsilons are
accounted), the round records and ULDP-GROUP-k's per-silo DP-SGD histories. Written after every
round of a run with an output folder, as ``checkpoint.pt`` (``torch.save`` of plain values;
loaded with ``weights_only=True``).

A run through the private weighting protocol cannot be resumed: its session keys and the
silos' OS-random noise are not, and must not be, in a file.
"""

from __future__ import annotations

import io
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_bytes
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.uldp.algorithm import SimulatedSilos, UldpAlgorithm
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.group_dp import History

__all__ = ["CHECKPOINT", "CONFIG", "RESUMABLE_ACROSS", "check_resumable", "load", "restore", "save"]

CHECKPOINT = "checkpoint.pt"
#: The run's resolved configuration, beside the checkpoint.
CONFIG = "config.toml"
#: Fields a resumed run may change besides ``rounds``: where the data are and how it computes.
RESUMABLE_ACROSS = frozenset({"data_dir", "device", "max_rows", "gradient"})
_FORMAT = 2


def check_resumable(config: UldpConfig) -> None:
    """Refuse a configuration whose run cannot be checkpointed (the private weighting protocol)."""
    if config.secure_weighting:
        raise ParameterError(
            "resume",
            "a run through the private weighting protocol cannot be checkpointed: its session "
            "keys and the silos' OS-random noise are never written to a file",
        )


def _simulated(algorithm: UldpAlgorithm) -> SimulatedSilos:
    """The in-process silos of ``algorithm`` (a deployed run is not checkpointed)."""
    if not isinstance(algorithm.silos, SimulatedSilos):
        raise ParameterError("resume", "only an in-process run is checkpointed")
    return algorithm.silos


def save(
    path: Path,
    config: UldpConfig,
    loop: FederatedRun[RoundRecord],
    algorithm: UldpAlgorithm,
    records: list[RoundRecord],
    initial: dict[str, float],
) -> None:
    """Write the state after the rounds run so far to ``path`` (atomically)."""
    ledger = loop.ledger
    silos = _simulated(algorithm)
    state = {
        "format": _FORMAT,
        "config": config.to_dict(),
        "flat": algorithm.flat.detach().cpu().clone(),
        "ledger": [ledger.selected(t).tolist() for t in range(ledger.rounds)],
        "records": [asdict(r) for r in records],
        "initial": dict(initial),
        "train_rng": silos.train_rng.bit_generator.state,
        "noise_rng": silos.noise_rng.bit_generator.state,
        "group": [[list(step) for step in h] for h in _group_histories(silos)],
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())


def load(path: Path, config: UldpConfig) -> dict[str, Any]:
    """Read a checkpoint and check that ``config`` continues its run.

    Raises
    ------
    ParameterError
        If the file is missing, unreadable or of another version, or the configurations differ
        in anything but ``rounds`` (which may grow) and :data:`RESUMABLE_ACROSS`.
    """
    if not path.is_file():
        raise ParameterError("resume", f"no {CHECKPOINT} in {path.parent}")
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises many kinds here
        raise ParameterError("resume", f"cannot read the checkpoint {path}: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ParameterError("resume", f"{path} is not a ULDP checkpoint of this version")
    stored = UldpConfig.from_stored(state["config"]).with_overrides(rounds=config.rounds)
    diff = config.differences(stored, ignore=RESUMABLE_ACROSS)
    if diff:
        raise ParameterError("resume", f"the configuration differs from the checkpoint's in {diff}")
    if len(state["records"]) > config.rounds:
        raise ParameterError(
            "rounds",
            f"the checkpoint has {len(state['records'])} rounds, more than {config.rounds}",
        )
    return state


def restore(
    state: dict[str, Any], loop: FederatedRun[RoundRecord], algorithm: UldpAlgorithm
) -> tuple[list[RoundRecord], dict[str, float]]:
    """Load ``state`` into a freshly built run; return its records and initial evaluation."""
    if loop.ledger.rounds:
        raise ParameterError("resume", "a checkpoint loads only into a run that has not started")
    flat = state["flat"]
    if not isinstance(flat, torch.Tensor) or flat.shape != algorithm.flat.shape:
        raise ParameterError("resume", "the checkpoint's model does not match this configuration")
    algorithm.flat = flat.clone().to(algorithm.flat.device)
    silos = _simulated(algorithm)
    silos.train_rng.bit_generator.state = state["train_rng"]
    silos.noise_rng.bit_generator.state = state["noise_rng"]
    for row in state["ledger"]:
        loop.ledger.record(np.asarray(row, dtype=np.intp))
    records = [RoundRecord.restore(r) for r in state["records"]]
    if len(records) != loop.ledger.rounds:
        raise ParameterError("resume", "the checkpoint is inconsistent (records and ledger differ)")
    for mine, saved in zip(_group_histories(silos), state["group"], strict=True):
        mine[:] = [(float(z), float(q), int(n)) for z, q, n in saved]
    algorithm.released = silos.runner.rounds = len(records)  # in process, every round releases
    return records, {k: float(v) for k, v in state["initial"].items()}


def _group_histories(silos: SimulatedSilos) -> list[History]:
    """ULDP-GROUP-k's per-silo DP-SGD histories (live; empty for the other methods)."""
    state = silos.runner.group_state
    return [] if state is None else state.histories
