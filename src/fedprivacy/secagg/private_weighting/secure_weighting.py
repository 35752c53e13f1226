"""One-object API of the private weighting protocol for ULDP-AVG-w / ULDP-SGD-w training.

:class:`SecureWeighting` holds the server and every silo of one session in this process and runs
Protocol 1 between them through the real messages (:mod:`.protocol`): ``setup()`` once, then
``aggregate(...)`` every round, which returns ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s``
with ``w_{s,u} = n_{s,u} / N_u`` (0 for users left out of the round's sub-sample) and the
seconds per phase. Each silo draws its own noise ``z_s`` (a discrete Gaussian on the plaintext's
integer grid, from OS randomness; the caller only gives its standard deviation).
:meth:`SecureWeighting.plaintext_reference` computes the same sum in float64 from the deltas and
the noise the silos report they added (:meth:`SecureWeighting.silo_noise`, the simulation's view
of each silo's private state), for the ``max_abs_deviation`` report;
:meth:`SecureWeighting.noise_multiplier` is the noise multiplier to account with.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.crypto.key_size import DEFAULT_KEY_BITS, check_key_bits
from fedprivacy.crypto.paillier import PaillierPrivateKey
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.errors import PlaintextRangeError, RecordLimitError
from fedprivacy.secagg.private_weighting.noise import (
    accounted_noise_multiplier,
    check_noise_std,
)
from fedprivacy.secagg.private_weighting.params import (
    DEFAULT_N_MAX,
    DEFAULT_PRECISION,
    MAX_ENCODED_MAGNITUDE,
    SESSION_ID_BYTES,
    PrivateWeightingParameters,
    encoded_bound,
    largest_feasible_n_max,
)
from fedprivacy.secagg.private_weighting.protocol import (
    RoundOutcome,
    SetupOutcome,
    phase_seconds,
    run_round,
    run_setup,
)
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.secagg.private_weighting.silo import PrivateWeightingSilo

__all__ = ["SecureWeighting"]


def _histogram(value: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(value)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ParameterError("histogram", f"must be a (silos, users) matrix, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)) or np.any(arr != np.rint(arr)):
            raise ParameterError("histogram", "must hold integer record counts")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise ParameterError("histogram", "record counts must be >= 0")
    empty = np.flatnonzero(out.sum(axis=0) == 0)
    if empty.size:
        raise ParameterError(
            "histogram",
            f"users {empty[:10].tolist()} have no records in any silo (N_u = 0): their weight "
            "n_{s,u} / N_u is undefined; leave them out",
        )
    return out


class SecureWeighting:
    """Protocol 1 for one training session, every party in this process.

    Parameters
    ----------
    histogram : array_like of int
        ``n_{s,u}``, shape ``(silos, users)``; every user needs ``N_u = sum_s n_{s,u} >= 1``.
    n_params : int, optional
        Model size; if omitted, taken from the first :meth:`aggregate` call.
    key_bits : int
        Paillier modulus size (default 3072; 2048 warns; smaller only with
        ``insecure_small_key``).
    insecure_small_key : bool
        Allow ``key_bits < 2048`` (factorable keys: tests and quick benchmarks only).
    precision : float
        Fixed-point precision ``P`` (default ``1e-10``, the paper's).
    n_max : int, optional
        Public bound ``N_max`` on the records of one user (default: the paper's 2000, or the
        largest value the key size allows if smaller). Must be at least ``max_u N_u``.
    clip_bound : float, optional
        Entrywise bound on the clipped deltas (pass the L2 clipping bound ``C``; default
        ``2**52 P``, the largest float64-exact value).
    noise_bound : float, optional
        Entrywise bound on each silo's noise in real units (default ``2**52 P``); the noise
        standard deviation of a round may be at most ``noise_bound / 16``.
    subsampling : bool
        Allow user-level sub-sampling (weights re-encrypted every round); without it the
        encrypted weights are computed once and reused (faster rounds).
    rerandomise : bool
        Re-randomise the silos' output ciphertexts (default True; see
        :mod:`fedprivacy.secagg.private_weighting.silo`).
    workers : int, optional
        Threads for the big-integer work (default: ``min(2, os.cpu_count())``).
    seed_source : callable
        ``seed_source(k)`` gives ``k`` random bytes for the session id and silo 0's seed ``R``
        (default :func:`os.urandom`).
    wire : bool
        Pass every message through its byte encoding.
    private_key : PaillierPrivateKey, optional
        The server's key pair, to skip key generation (tests, benchmarks).

    Raises
    ------
    ParameterError
        If an argument is invalid.
    RecordLimitError
        If some ``N_u > N_max``.
    PlaintextRangeError
        If ``N_max`` is too large for the key size.
    """

    def __init__(
        self,
        histogram: ArrayLike,
        *,
        n_params: int | None = None,
        key_bits: int = DEFAULT_KEY_BITS,
        insecure_small_key: bool = False,
        precision: float = DEFAULT_PRECISION,
        n_max: int | None = None,
        clip_bound: float | None = None,
        noise_bound: float | None = None,
        subsampling: bool = False,
        rerandomise: bool = True,
        workers: int | None = None,
        seed_source: Callable[[int], bytes] = os.urandom,
        wire: bool = True,
        private_key: PaillierPrivateKey | None = None,
    ) -> None:
        self.histogram = _histogram(histogram)
        self._n_params = None if n_params is None else require_int("n_params", n_params, 1)
        self._key_bits = check_key_bits(key_bits, insecure_small_key, name="key_bits")
        self._insecure_small_key = insecure_small_key
        self._precision = float(precision)
        self._clip = clip_bound
        self._noise = noise_bound
        self._n_max = n_max
        self._subsampling = subsampling
        self._rerandomise = rerandomise
        self._seed_source = seed_source
        self._wire = wire
        self._private_key = private_key
        threads = min(2, os.cpu_count() or 1) if workers is None else workers
        self._workers = require_int("workers", threads, 1)
        self._executor: ThreadPoolExecutor | None = None
        self.server: PrivateWeightingServer | None = None
        self.silos: list[PrivateWeightingSilo] = []
        self.setup_outcome: SetupOutcome | None = None
        self.last_round: RoundOutcome | None = None
        # validate everything that does not depend on n_params now
        self._parameters(1)

    # ------------------------------------------------------------------ parameters
    @property
    def n_silos(self) -> int:
        """int: ``|S|``."""
        return int(self.histogram.shape[0])

    @property
    def n_users(self) -> int:
        """int: ``|U|``."""
        return int(self.histogram.shape[1])

    @property
    def weights(self) -> NDArray[np.float64]:
        """numpy.ndarray: ``w_{s,u} = n_{s,u} / N_u``, shape ``(silos, users)`` (plaintext)."""
        h = self.histogram.astype(np.float64)
        out: NDArray[np.float64] = h / h.sum(axis=0, keepdims=True)
        return out

    @property
    def params(self) -> PrivateWeightingParameters:
        """PrivateWeightingParameters: The session's public parameters (after setup)."""
        if self.server is None:
            raise ParameterError("params", "not set up yet; call setup()")
        return self.server.params

    def _parameters(self, n_params: int) -> PrivateWeightingParameters:
        precision = self._precision
        if not np.isfinite(precision) or precision <= 0:
            raise ParameterError("precision", f"must be a finite number > 0, got {precision!r}")
        clip = MAX_ENCODED_MAGNITUDE * precision if self._clip is None else self._clip
        noise = MAX_ENCODED_MAGNITUDE * precision if self._noise is None else self._noise
        totals = self.histogram.sum(axis=0)
        if self._n_max is None:
            bits = self._key_bits
            feasible = largest_feasible_n_max(
                bits,
                self.n_users,
                self.n_silos,
                encoded_bound(float(clip), precision, "clip_bound"),
                encoded_bound(float(noise), precision, "noise_bound"),
            )
            n_max = min(DEFAULT_N_MAX, feasible)
            if n_max < 1:
                raise PlaintextRangeError("key_bits", f"{bits}-bit keys cannot hold the aggregate")
        else:
            n_max = require_int("n_max", self._n_max, 1)
        if int(totals.max()) > n_max:
            u = int(np.argmax(totals))
            raise RecordLimitError(
                "histogram",
                f"user {u} has N_u = {int(totals[u])} records in total, more than N_max = "
                f"{n_max}: C_LCM = lcm(1..N_max) must be divisible by every N_u. Raise n_max "
                "(C_LCM grows like e^N_max and must stay below n: about 2,100 at most for "
                "3072-bit keys) or cap the records per user",
            )
        session = self._seed_source(SESSION_ID_BYTES)
        return PrivateWeightingParameters(
            session_id=session,
            n_silos=self.n_silos,
            n_users=self.n_users,
            n_params=n_params,
            clip_bound=clip,
            noise_bound=noise,
            key_bits=self._key_bits,
            precision=precision,
            n_max=n_max,
            subsampling=self._subsampling,
            rerandomise=self._rerandomise,
            insecure_small_key=self._insecure_small_key,
        )

    # ------------------------------------------------------------------ protocol
    def setup(self, n_params: int | None = None) -> dict[str, float]:
        """Run the setup phase (key exchange and blinded histograms).

        Parameters
        ----------
        n_params : int, optional
            Model size, if not given to the constructor.

        Returns
        -------
        dict of str to float
            Seconds per phase (see :func:`phase_seconds`).

        Raises
        ------
        ParameterError
            If the model size is unknown or the session is already set up.
        """
        if self.server is not None:
            raise ParameterError("setup", "this session is already set up")
        size = n_params if n_params is not None else self._n_params
        if size is None:
            raise ParameterError("n_params", "pass the model size to setup() or the constructor")
        params = self._parameters(require_int("n_params", size, 1))
        if self._workers > 1 and self._executor is None:
            self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="paillier")
        self.server = PrivateWeightingServer(
            params, private_key=self._private_key, executor=self._executor
        )
        self.silos = [
            PrivateWeightingSilo(
                params,
                s,
                self.histogram[s],
                seed_source=self._seed_source,
                executor=self._executor,
            )
            for s in range(self.n_silos)
        ]
        self.setup_outcome = run_setup(self.server, self.silos, wire=self._wire)
        return phase_seconds(self.setup_outcome)

    def aggregate(
        self,
        round_index: int,
        deltas_per_silo: Sequence[ArrayLike],
        noise_std: float,
        sampled: ArrayLike | None = None,
    ) -> tuple[NDArray[np.float64], dict[str, float]]:
        """Run one round: the securely weighted, noised sum of the silos' deltas.

        Parameters
        ----------
        round_index : int
            Strictly increasing round number.
        deltas_per_silo : sequence of array_like
            Per silo, clipped per-user deltas of shape ``(users, n_params)``.
        noise_std : float
            Standard deviation of each silo's noise in real units (``sigma C / sqrt(|S|)`` for
            ULDP-AVG-w); every silo draws ``N_Z(0, (noise_std C_LCM / P)^2)`` on the plaintext
            grid from OS randomness. ``0`` adds no noise (correctness tests).
        sampled : array_like of bool, optional
            The users of this round's sub-sample (default: all; sessions without
            ``subsampling`` must use all).

        Returns
        -------
        aggregate : numpy.ndarray
            ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s``, within ``|U_t| P / 2`` (plus
            float64 rounding) of the same sum with the noise the silos report
            (:meth:`plaintext_reference`).
        seconds : dict of str to float
            Seconds per phase (see :func:`phase_seconds`).
        """
        if self.server is None:
            first = np.asarray(deltas_per_silo[0]) if len(deltas_per_silo) else np.zeros((0, 0))
            if first.ndim != 2:
                raise ParameterError("deltas_per_silo", "each entry must be (users, n_params)")
            self.setup(self._n_params if self._n_params is not None else int(first.shape[1]))
        assert self.server is not None
        check_noise_std(noise_std, self.server.params.noise_bound)  # before the round opens
        self.last_round = run_round(
            self.server,
            self.silos,
            round_index,
            deltas_per_silo,
            noise_std,
            sampled,
            wire=self._wire,
        )
        return self.last_round.aggregate, phase_seconds(self.last_round)

    def silo_noise(self) -> list[NDArray[np.float64]]:
        """The noise each silo added in the last round, in real units (simulation only).

        Each silo keeps its draw as private state (the server never sees it); this in-process
        simulation reads it to check the protocol against the plaintext aggregate.

        Returns
        -------
        list of numpy.ndarray
            Per silo, ``Z_s P / C_LCM`` (float64, correctly rounded).

        Raises
        ------
        ParameterError
            If no round has run.
        """
        if self.server is None or any(s.last_noise is None for s in self.silos):
            raise ParameterError("silo_noise", "no round has run yet")
        p = self.params
        out = []
        for silo in self.silos:
            assert silo.last_noise is not None
            grid = np.array([v / p.c_lcm for v in silo.last_noise], dtype=np.float64)
            out.append(grid * p.precision)
        return out

    def plaintext_reference(
        self,
        deltas_per_silo: Sequence[ArrayLike],
        sampled: ArrayLike | None = None,
    ) -> NDArray[np.float64]:
        """The last round's aggregate computed in the clear in float64 (``max_abs_deviation``).

        Parameters
        ----------
        deltas_per_silo, sampled
            As given to the last :meth:`aggregate`.

        Returns
        -------
        numpy.ndarray
            ``sum_s sum_u w_{s,u} Delta_{s,u} + sum_s z_s`` with ``w_{s,u} = 0`` for unsampled
            users and ``z_s`` the noise silo ``s`` reports it added (:meth:`silo_noise`).
        """
        if len(deltas_per_silo) != self.n_silos:
            raise ParameterError("deltas_per_silo", "need one delta matrix per silo")
        noise = self.silo_noise()
        keep = np.ones(self.n_users) if sampled is None else np.asarray(sampled, dtype=np.float64)
        w = self.weights * keep[None, :]
        total = np.zeros_like(noise[0])
        for s in range(self.n_silos):
            total = total + w[s] @ np.asarray(deltas_per_silo[s], dtype=np.float64)
            total = total + noise[s]
        return total

    def noise_multiplier(self, noise_std: float, clip: float) -> float:
        """The noise multiplier to account with for silo noise ``noise_std`` and L2 clip ``C``.

        :func:`~fedprivacy.secagg.private_weighting.noise.accounted_noise_multiplier` of this
        session's parameters (slightly below ``sqrt(|S|) noise_std / C``).
        """
        return accounted_noise_multiplier(self.params, noise_std, clip)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Shut down the thread pool (the session cannot run further rounds)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> SecureWeighting:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
