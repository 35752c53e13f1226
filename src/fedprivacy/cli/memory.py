"""Refuse, up front and naming the flag, runs whose arrays cannot fit in memory.

Each command with size parameters has an estimator in :data:`ESTIMATORS`: from its validated
configuration it returns, for each flag that drives memory, a rough count of the bytes the run
needs (the largest arrays, not every temporary). :func:`check_memory` compares them with
:func:`memory_budget` (half of the physical memory) and raises a :class:`ParameterError` naming
the flag, instead of numpy's ``ArrayMemoryError`` traceback minutes later.

Examples
--------
>>> from types import SimpleNamespace
>>> config = SimpleNamespace(users=10**12, rounds=3, per_round=2, metrics="none")
>>> try:
...     check_memory("simulate", config, budget=2**30)
... except ParameterError as exc:
...     print(exc.name, str(exc).split(" of memory")[0])
users users: 10^12 needs about 116 TiB
>>> check_memory("simulate", SimpleNamespace(users=100, rounds=3, per_round=2), budget=2**30)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError

__all__ = ["ESTIMATORS", "check_memory", "memory_budget"]

_FALLBACK_PHYSICAL = 8 * 2**30


def memory_budget() -> int:
    """Half of the physical memory, in bytes (8 GiB assumed where the system does not say).

    Examples
    --------
    >>> memory_budget() > 0
    True
    """
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = _FALLBACK_PHYSICAL
    return max(1, physical if physical > 0 else _FALLBACK_PHYSICAL) // 2


def _simulate(config: Any) -> dict[str, float]:
    # per user: selector weights, availability, frequencies, dropout (float64 each, ~16 arrays);
    # per round: cardinality, fairness gap, skipped flags and the ledger's selected indices
    users = float(config.users)
    rounds = float(config.rounds)
    return {
        "users": 8.0 * 16 * users,
        "rounds": 8.0 * rounds * (16 + min(float(config.per_round), users)),
    }


def _uldp(config: Any) -> dict[str, float]:
    # per user: allocation counts per silo, weights, sampling masks, records per user
    silos = float(getattr(config, "silos", None) or 5)
    return {"users": 8.0 * float(config.users) * (silos + 16)}


def _regress(config: Any) -> dict[str, float]:
    if getattr(config, "dataset", None) is not None:  # real silos: their size is the data's
        return {}
    from fedprivacy.regression.schedule import iteration_count

    total = float(config.clients) * float(config.n)
    p = float(config.p)
    steps = float(
        config.iterations or iteration_count(max(1, int(total)), config.learning_rate, config.c)
    )
    data = 8.0 * total * (p + 1)
    # one replication: the pooled data, the per-client Gram matrices and the iterate trajectory
    needs = data + 8.0 * float(config.clients) * p * p + 8.0 * steps * p
    ratios = {"clients": config.clients / 15, "n": config.n / 300, "p": config.p / 200}
    driver = max(ratios, key=lambda k: ratios[k])
    result = {driver: needs}
    if config.iterations is not None:
        result["iterations"] = 8.0 * steps * p
    return result


#: command -> estimator: config -> {config field: bytes it drives}
ESTIMATORS: Registry[Callable[[Any], dict[str, float]]] = Registry("command")
ESTIMATORS.register("simulate", _simulate)
ESTIMATORS.register("uldp", _uldp)
ESTIMATORS.register("regress", _regress)


def _size(nbytes: float) -> str:
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    power = min(len(units) - 1, max(0, int(math.log(max(nbytes, 1.0), 1024))))
    return f"{nbytes / 1024**power:.0f} {units[power]}"


def _value(value: object) -> str:
    if isinstance(value, int) and value >= 10**9 and value == 10 ** round(math.log10(value)):
        return f"10^{round(math.log10(value))}"
    return str(value)


def check_memory(command: str, config: Any, *, budget: int | None = None) -> None:
    """Raise :class:`ParameterError` if ``command``'s run of ``config`` cannot fit in memory.

    Parameters
    ----------
    command : str
        A key of :data:`ESTIMATORS`; other commands are not checked.
    config : object
        The command's validated configuration (attributes as the estimator reads them).
    budget : int or None
        Bytes allowed; default :func:`memory_budget`.

    Raises
    ------
    ParameterError
        Named after the configuration field (the CLI shows the flag) that drives the need.
    """
    estimator = ESTIMATORS.get(command)
    if estimator is None:
        return
    limit = memory_budget() if budget is None else budget
    for field, nbytes in estimator(config).items():
        if not nbytes <= limit:
            raise ParameterError(
                field,
                f"{_value(getattr(config, field))} needs about {_size(nbytes)} of memory, more "
                f"than the {_size(limit)} this machine allows (half of its physical memory); "
                "use a smaller value",
            )
