"""Fault injection of a lying server: the parameters it proposes instead of the configuration's.

``fedprivacy flower deploy`` (and the tests) can make the ServerApp lie, to show that every party
refuses under its own policy (:mod:`fedprivacy.policy`). A forge is ``"NAME=VALUE,..."``; each
deployed algorithm says which names it forges (FedAvg:
:data:`~fedprivacy.flower.faults.lying_server.FEDAVG_FORGES`; cross-silo
ULDP-FL: :data:`fedprivacy.flower.faults.silo_forge.SILO_FORGES`).

Examples
--------
>>> parse_forge("threshold=2,noise=", ("threshold", "noise"))
{'threshold': '2', 'noise': ''}
>>> parse_forge("")
{}
"""

from __future__ import annotations

from collections.abc import Iterable

from fedprivacy.errors import ParameterError

__all__ = ["parse_forge"]


def parse_forge(text: str, allowed: Iterable[str] | None = None) -> dict[str, str]:
    """``"A=1,B=2"`` -> ``{"A": "1", "B": "2"}``; names outside ``allowed`` are refused.

    A ``;`` (rounds in turn, for the tasks that take it) counts as a ``,`` here: this checks the
    names of every round's forge at once.

    Raises
    ------
    ParameterError
        Named ``forge``, for an entry without ``=`` or a name not in ``allowed``.
    """
    out: dict[str, str] = {}
    names = None if allowed is None else set(allowed)
    for entry in filter(None, (e.strip() for e in text.replace(";", ",").split(","))):
        name, sep, value = entry.partition("=")
        if not sep:
            raise ParameterError("forge", f"entries are NAME=VALUE, got {entry!r}")
        if names is not None and name not in names:
            raise ParameterError("forge", f"{name!r} is not one of {sorted(names)}")
        out[name.strip()] = value.strip()
    return out
