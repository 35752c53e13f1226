"""In-process driver: passes Protocol 1's messages between a server and its silos.

Every message goes through its byte encoding (``wire=True``, the default), so the driver
exercises exactly what a network transport would carry, and every party's computation is timed
per phase:

* ``key_exchange``: steps 1(a)-(c) (Paillier key generation, X25519 keys relayed by the server,
  silo 0's seed encrypted under the pairwise keys and relayed);
* ``blinded_histogram``: steps 1(d)-(f) (``r_u``, blinded and masked histograms, the server's
  sum and inverses);
* ``weights_encryption``: step 2(a) on the server;
* ``rerandomisation``: the silos' data-independent encryptions of zero, computed before the
  round's data is known (offline);
* ``local_encryption``: steps 2(b)-(c) on each silo (weighting in the encrypted domain, the
  silo's own discrete Gaussian noise, masks; the training itself is the caller's);
* ``aggregation``: step 2(c) on the server (product, CRT decryption, decoding).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.messages import Message, encode_message
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.secagg.private_weighting.silo import PrivateWeightingSilo

__all__ = ["RoundOutcome", "SetupOutcome", "phase_seconds", "run_round", "run_setup"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class SetupOutcome:
    """Timings of the setup.

    Attributes
    ----------
    server_seconds : dict of str to float
        Server seconds per phase (``key_exchange``, ``blinded_histogram``).
    silo_seconds : tuple of dict of str to float
        Each silo's seconds per phase.
    wire_bytes : int
        Bytes of every message exchanged.
    server_cpu_seconds, silo_cpu_seconds
        The same in process CPU time (every thread), insensitive to other load on the machine.
    """

    server_seconds: dict[str, float]
    silo_seconds: tuple[dict[str, float], ...]
    wire_bytes: int
    server_cpu_seconds: dict[str, float] = field(default_factory=dict)
    silo_cpu_seconds: tuple[dict[str, float], ...] = ()


@dataclass(frozen=True)
class RoundOutcome:
    """The aggregate of one round, with timings.

    Attributes
    ----------
    aggregate : numpy.ndarray
        The decoded ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s``.
    server_seconds : dict of str to float
        Server seconds per phase (``weights_encryption``, ``aggregation``).
    silo_seconds : tuple of dict of str to float
        Each silo's seconds per phase (``rerandomisation``, ``local_encryption``).
    wire_bytes : int
        Bytes of every message exchanged.
    server_cpu_seconds, silo_cpu_seconds
        The same in process CPU time (every thread), insensitive to other load on the machine.
    plaintexts : tuple of int
        The server's decrypted signed integers ``C_LCM sum_s sum_u w_{s,u} E_{s,u} + sum_s Z_s``
        (its legitimate view; the aggregate is ``plaintexts * P / C_LCM``).
    """

    aggregate: np.ndarray
    server_seconds: dict[str, float]
    silo_seconds: tuple[dict[str, float], ...]
    wire_bytes: int
    server_cpu_seconds: dict[str, float] = field(default_factory=dict)
    silo_cpu_seconds: tuple[dict[str, float], ...] = ()
    plaintexts: tuple[int, ...] = ()


def phase_seconds(outcome: SetupOutcome | RoundOutcome, *, cpu: bool = False) -> dict[str, float]:
    """Flatten an outcome's timings: ``<phase>_server``, ``<phase>_silo_mean``, ``_silo_max``.

    Parameters
    ----------
    outcome : SetupOutcome or RoundOutcome
        Timings from :func:`run_setup` or :func:`run_round`.
    cpu : bool
        Also add the CPU seconds (``<phase>_server_cpu``, ``<phase>_silo_mean_cpu``).

    Returns
    -------
    dict of str to float
        Seconds; silo entries are the mean and the maximum over silos of that silo's seconds.
    """
    out = {f"{phase}_server": float(v) for phase, v in outcome.server_seconds.items()}
    phases = sorted({phase for book in outcome.silo_seconds for phase in book})
    for phase in phases:
        values = [book.get(phase, 0.0) for book in outcome.silo_seconds]
        out[f"{phase}_silo_mean"] = float(np.mean(values))
        out[f"{phase}_silo_max"] = float(np.max(values))
    if cpu:
        for phase, v in outcome.server_cpu_seconds.items():
            out[f"{phase}_server_cpu"] = float(v)
        for phase in phases:
            values = [book.get(phase, 0.0) for book in outcome.silo_cpu_seconds]
            out[f"{phase}_silo_mean_cpu"] = float(np.mean(values))
    return out


class _Clock:
    """Per-party, per-phase stopwatch and byte counter."""

    def __init__(self, silos: int, wire: bool, transcript: list[bytes] | None) -> None:
        self.server: dict[str, float] = {}
        self.silos: list[dict[str, float]] = [{} for _ in range(silos)]
        self.server_cpu: dict[str, float] = {}
        self.silos_cpu: list[dict[str, float]] = [{} for _ in range(silos)]
        self.wire = wire
        self.bytes = 0
        self.transcript = transcript

    def send(self, message: Message) -> Message | bytes:
        if not self.wire and self.transcript is None:
            return message
        data = encode_message(message)
        self.bytes += len(data)
        if self.transcript is not None:
            self.transcript.append(data)
        return data if self.wire else message

    def at_silo(self, silo: int | None, phase: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)``, its wall and CPU time booked to ``silo`` (``None``: the server)."""
        start = time.perf_counter(), time.process_time()
        out = fn(*args)
        wall, cpu = time.perf_counter(), time.process_time()
        book = self.server if silo is None else self.silos[silo]
        cpu_book = self.server_cpu if silo is None else self.silos_cpu[silo]
        book[phase] = book.get(phase, 0.0) + wall - start[0]
        cpu_book[phase] = cpu_book.get(phase, 0.0) + cpu - start[1]
        return out

    def at_server(self, phase: str, fn: Callable[..., _T], *args: Any) -> _T:
        return self.at_silo(None, phase, fn, *args)

    def server_sends(self, phase: str, messages: dict[int, Any]) -> dict[int, Message | bytes]:
        return self.at_server(phase, lambda: {s: self.send(m) for s, m in messages.items()})

    def silo_sends(self, silo: int, phase: str, message: Message) -> Message | bytes:
        return self.at_silo(silo, phase, self.send, message)


def _check_parties(server: PrivateWeightingServer, silos: Sequence[PrivateWeightingSilo]) -> None:
    if [s.silo for s in silos] != list(range(server.params.n_silos)):
        raise ParameterError("silos", "must be the session's silos 0 .. n_silos-1, in order")
    if any(s.params != server.params for s in silos):
        raise ParameterError("silos", "every party must use the same parameters")


def run_setup(
    server: PrivateWeightingServer,
    silos: Sequence[PrivateWeightingSilo],
    *,
    wire: bool = True,
    transcript: list[bytes] | None = None,
) -> SetupOutcome:
    """Run Protocol 1's setup (steps 1(a)-(f)).

    Parameters
    ----------
    server : PrivateWeightingServer
        The server, in its initial stage.
    silos : sequence of PrivateWeightingSilo
        Silos ``0 .. n_silos-1`` in order.
    wire : bool
        Send every message through its byte encoding.
    transcript : list of bytes, optional
        If given, the encoding of every message is appended to it (what an eavesdropper on
        every link, or the relaying server, sees).

    Returns
    -------
    SetupOutcome
        Timings and bytes.
    """
    _check_parties(server, silos)
    clock = _Clock(len(silos), wire, transcript)
    kx, bh = "key_exchange", "blinded_histogram"
    announcements = clock.server_sends(kx, clock.at_server(kx, server.start_setup))
    for s, silo in enumerate(silos):
        reply = clock.at_silo(s, kx, silo.on_paillier_key, announcements[s])
        clock.at_server(kx, server.receive, clock.silo_sends(s, kx, reply))
    rosters = clock.server_sends(kx, clock.at_server(kx, server.finish_keys))
    for s, silo in enumerate(silos):
        shares = clock.at_silo(s, kx, silo.on_roster, rosters[s])
        if shares is not None:
            clock.at_server(kx, server.receive, clock.silo_sends(s, kx, shares))
    deliveries = clock.server_sends(kx, clock.at_server(kx, server.finish_seed))
    for s, silo in enumerate(silos):
        clock.at_silo(s, kx, silo.on_seed_delivery, deliveries[s])
    for s, silo in enumerate(silos):
        histogram = clock.at_silo(s, bh, silo.blinded_histogram)
        clock.at_server(bh, server.receive, clock.silo_sends(s, bh, histogram))
    clock.at_server(bh, server.finish_histograms)
    return SetupOutcome(
        clock.server, tuple(clock.silos), clock.bytes, clock.server_cpu, tuple(clock.silos_cpu)
    )


def run_round(
    server: PrivateWeightingServer,
    silos: Sequence[PrivateWeightingSilo],
    round_index: int,
    deltas_per_silo: Sequence[ArrayLike],
    noise_std: float,
    sampled: ArrayLike | None = None,
    *,
    wire: bool = True,
    transcript: list[bytes] | None = None,
) -> RoundOutcome:
    """Run one weighting round (steps 2(a)-(c)).

    Parameters
    ----------
    server : PrivateWeightingServer
        The server, set up and between rounds.
    silos : sequence of PrivateWeightingSilo
        Silos ``0 .. n_silos-1`` in order, set up.
    round_index : int
        Strictly increasing round number.
    deltas_per_silo : sequence of array_like
        Per silo, the clipped per-user deltas, shape ``(n_users, n_params)``.
    noise_std : float
        Standard deviation of each silo's noise in real units (each silo draws its own discrete
        Gaussian, see :meth:`PrivateWeightingSilo.on_weights`; ``0``: none).
    sampled : array_like of bool, optional
        The server's user-level sub-sample (default: every user).
    wire : bool
        Send every message through its byte encoding.
    transcript : list of bytes, optional
        If given, the encoding of every message is appended to it.

    Returns
    -------
    RoundOutcome
        The aggregate and the timings.

    Raises
    ------
    FedPrivacyError
        Whatever a party raises; a round that a silo cannot complete is aborted on the server
        (no output) and its index stays used.
    """
    _check_parties(server, silos)
    if len(deltas_per_silo) != len(silos):
        raise ParameterError("deltas_per_silo", "need one delta matrix per silo")
    clock = _Clock(len(silos), wire, transcript)
    we, rr, le, ag = "weights_encryption", "rerandomisation", "local_encryption", "aggregation"
    weights = clock.server_sends(we, clock.at_server(we, server.start_round, round_index, sampled))
    params = server.params
    try:
        for s, silo in enumerate(silos):
            if params.rerandomise:
                missing = params.n_params - silo.randomisers_ready
                if missing > 0:
                    clock.at_silo(s, rr, silo.precompute_randomisers, missing)
            update = clock.at_silo(
                s, le, silo.on_weights, weights[s], deltas_per_silo[s], noise_std
            )
            clock.at_server(ag, server.receive, clock.silo_sends(s, le, update))
    except BaseException:
        server.abort_round()  # no partial aggregate; the round index stays used
        raise
    aggregate = clock.at_server(ag, server.finish_round)
    return RoundOutcome(
        aggregate,
        clock.server,
        tuple(clock.silos),
        clock.bytes,
        clock.server_cpu,
        tuple(clock.silos_cpu),
        server.last_plaintexts,
    )
