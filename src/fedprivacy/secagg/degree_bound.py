"""How many SecAgg+ neighbours a round needs: Bell et al.'s conditions, computed exactly.

In SecAgg+ (Bell et al., CCS 2020) a user shares its secrets with its ``k`` neighbours only, and
the threshold is a majority of its sharing group, ``t = floor((k + 1) / 2) + 1``. Two things can
go wrong, each for some user of the round:

- **security**: ``t`` or more of its neighbours are corrupt (colluding with the server), who
  then hold enough shares of its secrets to unmask its input;
- **correctness**: more than ``k - t`` of its neighbours drop out, so its secrets cannot be
  rebuilt and the round aborts.

In the random Harary graph of :func:`~fedprivacy.secagg.params.harary_neighbours` a user's
neighbours are a uniformly random ``k``-subset of the other ``n - 1`` parties (a uniformly random
ring), so with ``c`` corrupt (or ``d`` dropped) parties the count among them is hypergeometric,
and a union bound over the ``n`` users gives the round's failure probability. :func:`secure_degree`
is the least ``k`` whose bound is at most ``2**-sigma`` for security and ``2**-eta`` for
correctness (``sigma = 40``, ``eta = 20``, Bell et al.'s choices), from scipy's exact
hypergeometric tail.

What it assumes: the graph is random *for the adversary*. Today the server chooses the graph's
seed, so it can try seeds; each try succeeds against a given user with probability at most
``2**-sigma / n``.

Examples
--------
>>> secure_degree(100, corrupt=0.05), secure_degree(100, corrupt=0.2)
(10, 40)
>>> secure_degree(100, corrupt=0.05, dropout=0.3)
60
>>> secure_degree(10, corrupt=1 / 3)  # 3 corrupt parties never reach t = 4 of 6 neighbours
6
>>> secure_degree(40, dropout=0.5)  # no sparser graph meets the bound: the complete one
39
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fedprivacy.errors import ParameterError

__all__ = ["CORRECTNESS_BITS", "DEFAULT_CORRUPT_FRACTION", "SECURITY_BITS", "secure_degree"]

DEFAULT_CORRUPT_FRACTION = 0.05
"""The fraction of a round's parties a node assumes may collude with the server, by default."""
SECURITY_BITS = 40
CORRECTNESS_BITS = 20


def _check_fraction(name: str, value: float, upper: float) -> float:
    if not (math.isfinite(value) and 0.0 <= value < upper):
        raise ParameterError(name, f"must lie in [0, {upper:g}), got {value}")
    return float(value)


@functools.lru_cache(maxsize=256)
def secure_degree(
    parties: int,
    corrupt: float = DEFAULT_CORRUPT_FRACTION,
    dropout: float = 0.0,
    *,
    sigma: int = SECURITY_BITS,
    eta: int = CORRECTNESS_BITS,
) -> int:
    """The least SecAgg+ degree that keeps a round of ``parties`` secure and correct.

    Parameters
    ----------
    parties : int
        ``n``, the round's parties (at least 3).
    corrupt : float
        Fraction of them that may collude with the server, in ``[0, 0.5)``.
    dropout : float
        Fraction that may drop out during the protocol, in ``[0, 1)``; 0: security only.
    sigma, eta : int
        The round fails security with probability at most ``2**-sigma``, correctness with at
        most ``2**-eta``.

    Returns
    -------
    int
        The degree ``k`` (the threshold a majority of ``k + 1``); ``parties - 1`` (the complete
        graph) when no smaller degree meets both bounds.
    """
    from scipy.stats import hypergeom  # the nodes' stages import no scipy until a round needs it

    n = int(parties)
    if n < 3:
        raise ParameterError("parties", f"must be at least 3, got {parties}")
    corrupt_users = math.floor(_check_fraction("corrupt", corrupt, 0.5) * n)
    dropped_users = math.ceil(_check_fraction("dropout", dropout, 1.0) * n)
    k = np.arange(2, n - 1, 2)  # even degrees: every user keeps k holders on any ring
    t = np.maximum(2, (k + 1) // 2 + 1)
    insecure = n * hypergeom.sf(t - 1, n - 1, corrupt_users, k)
    broken = n * hypergeom.sf(k - t, n - 1, dropped_users, k)
    ok = np.flatnonzero((insecure <= 2.0**-sigma) & (broken <= 2.0**-eta))
    return int(k[ok[0]]) if ok.size else n - 1
