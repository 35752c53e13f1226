"""A silo's side of Protocol 1: its rounds (step 2), after its setup (:mod:`.silo_setup`).

What a silo sees (Theorem 5): the Paillier public key, the other silos' X25519 public keys, the
shared seed ``R`` (hence every ``r_u``, shared by all silos by design), and per round the
ciphertexts ``Enc(B_inv(N_u))``: fresh Paillier encryptions under the server's key, which reveal
neither ``N_u`` nor (with sub-sampling) which users are sampled. It never sees another silo's
``n_{s',u}``, ``B(N_u)`` or the aggregate's components.

The weighting (step 2(b)), derived from the paper: with ``B_inv(N_u) = (r_u N_u)^-1 mod n``,

    Enc(B_inv)^(n_{s,u} r_u C_LCM) = Enc(n_{s,u} C_LCM N_u^-1) = Enc(n_{s,u} (C_LCM / N_u))

because ``N_u | C_LCM`` when ``N_u <= N_max``: the plaintext is the integer
``n_{s,u} C_LCM / N_u = w_{s,u} C_LCM``, the weight scaled by ``C_LCM`` (an unsampled user's
weight is ``Enc(0)`` and stays 0). Raising it to the encoded delta ``E = round(Delta / P)``
multiplies the plaintext by ``E``; summing over users and adding the silo's noise ``Z_s`` gives
``C_LCM sum_u w_{s,u} E_{s,u} + Z_s``, which the server decodes by dividing by ``C_LCM`` and
multiplying by ``P``. ``Z_s`` is a discrete Gaussian on that integer grid (one unit is
``P / C_LCM``) drawn by the silo from OS randomness (:mod:`.noise`), not the paper's ``C_LCM``
times the encoded noise, which would leave the plaintext modulo ``C_LCM`` noise-free.

How it is computed fast (:mod:`.weighting`): the scalar ``k_u = n_{s,u} r_u C_LCM mod n`` is
fixed at setup, so each round needs one full exponentiation ``W_u = Enc(B_inv)^(k_u)`` per user
(in parallel threads), then only the small exponents ``E`` (``log2(clip / P)`` bits) per
parameter, through a fixed-base table of ``W_u`` shared by every parameter; negative ``E`` through
an offset. When the server sends the same ciphertexts again (sessions without sub-sampling) the
``W_u`` and their tables are reused.

Re-randomisation (not in the paper, on by default): the silo multiplies each output ciphertext by
a fresh ``r^n mod n^2``. Without it the randomness of the output is ``prod_u rho_u^(k_u E)``,
a function of the server's own encryption randomness ``rho_u`` and of the secrets ``k_u E``;
a server that knows ``p`` and ``q`` extracts it and, if it can take discrete logarithms modulo
``p`` and ``q`` (e.g. a key generated with smooth ``p - 1``, which the silos cannot detect),
recovers the per-user deltas. The ``r^n`` do not depend on the data, so they are computed ahead
of the round (:meth:`PrivateWeightingSilo.precompute_randomisers`).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np
from gmpy2 import mpz
from numpy.typing import ArrayLike

from fedprivacy.crypto.fixed_base import choose_window
from fedprivacy.crypto.keys import generate_keypair
from fedprivacy.crypto.paillier_public import PaillierPublicKey
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.encoding import encode
from fedprivacy.secagg.private_weighting.errors import (
    MalformedMessageError,
)
from fedprivacy.secagg.private_weighting.messages import (
    EncryptedWeights,
    MaskedUpdate,
    Message,
    MessageKind,
)
from fedprivacy.secagg.private_weighting.noise import sample_noise
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters, silo_records
from fedprivacy.secagg.private_weighting.randomness import (
    pairwise_mask_totals,
    round_mask_key,
)
from fedprivacy.secagg.private_weighting.silo_setup import SiloSetup, SiloStage
from fedprivacy.secagg.private_weighting.weighting import WeightTables, weighted_products

__all__ = ["PrivateWeightingSilo"]

_VIEW_LENGTH = 16


class PrivateWeightingSilo(SiloSetup):
    """One silo's state machine.

    Parameters
    ----------
    params : PrivateWeightingParameters
        The session's public parameters.
    silo : int
        This silo's id in ``[0, n_silos)``; silo 0 draws the shared seed.
    records : array_like of int
        ``n_{s,u}`` for every user (0 for users without records here), each ``<= N_max``.
    seed_source : callable, optional
        ``seed_source(k)`` returns ``k`` random bytes (default :func:`os.urandom`); silo 0 draws
        ``R`` from it. It must be a cryptographic source outside tests.
    executor : concurrent.futures.Executor, optional
        Thread pool for the exponentiations.
    window : int, optional
        Digit width of the fixed-base tables (default: :func:`choose_window`).

    Attributes
    ----------
    received : collections.deque of Message
        The last 16 server messages this silo accepted: its whole view of the protocol for short
        sessions (audits and tests).

    Raises
    ------
    ParameterError
        If ``silo`` or ``records`` is invalid.
    RecordLimitError
        If some ``n_{s,u} > N_max``.
    """

    def __init__(
        self,
        params: PrivateWeightingParameters,
        silo: int,
        records: ArrayLike,
        *,
        seed_source: Callable[[int], bytes] = os.urandom,
        executor: Executor | None = None,
        window: int | None = None,
    ) -> None:
        if isinstance(silo, bool) or not isinstance(silo, int) or not 0 <= silo < params.n_silos:
            raise ParameterError("silo", f"must be an integer in [0, {params.n_silos})")
        super().__init__(params, silo)
        self.silo = silo
        self._records = silo_records(records, params.n_users, params.n_max)
        self._seed_source = seed_source
        self._executor = executor
        self._window = (
            window if window is not None else choose_window(params.exponent_bits, params.n_params)
        )
        self.stage = SiloStage.NEW
        self.last_round: int | None = None
        self._keypair = generate_keypair()
        self._public: PaillierPublicKey | None = None
        self._agreements: dict[int, bytes] = {}
        self._seed: bytes | None = None
        self._scalars: list[mpz] = []
        self._tables: WeightTables | None = None
        self._randomisers: deque[mpz] = deque()
        self._last_noise: tuple[int, ...] | None = None
        # the silo's view: the last accepted server messages (bounded over long trainings)
        self.received: deque[Message] = deque(maxlen=_VIEW_LENGTH)

    # ------------------------------------------------------------------ offline
    def precompute_randomisers(self, count: int) -> None:
        """Compute ``count`` fresh encryptions of zero ahead of a round (data-independent).

        Parameters
        ----------
        count : int
            How many ``r^n mod n^2`` to add to the pool.
        """
        self._randomisers.extend(self.public_key.randomisers(count, self._executor))

    @property
    def randomisers_ready(self) -> int:
        """int: Precomputed encryptions of zero in the pool."""
        return len(self._randomisers)

    @property
    def last_noise(self) -> tuple[int, ...] | None:
        """The noise of the last answered round, in plaintext units (None before any).

        The silo's private state (in a deployment it never leaves the silo); the in-process
        simulation reads it to compare the protocol's output with the plaintext aggregate.
        """
        return self._last_noise

    # ------------------------------------------------------------------ 2(b), 2(c)
    def on_weights(
        self, message: EncryptedWeights | bytes, deltas: ArrayLike, noise_std: float
    ) -> MaskedUpdate:
        """Steps 2(b)-(c): weight the clipped deltas in the encrypted domain, add noise and masks.

        The silo draws its own noise: ``N_Z(0, (noise_std C_LCM / P)^2)`` per parameter, on the
        plaintext's grid, from OS randomness (:mod:`.noise`); it keeps the draw as its private
        state (:attr:`last_noise`), never sent anywhere.

        Parameters
        ----------
        message : EncryptedWeights or bytes
            ``Enc(B_inv(N_u))`` for every user, for this round.
        deltas : array_like
            Clipped per-user model deltas, shape ``(n_users, n_params)``, entries within
            ``clip_bound`` (rows of users without records here are ignored: their weight is 0).
        noise_std : float
            Standard deviation of this silo's noise in real units (``0``: none);
            ``16 noise_std`` must not exceed the session's ``noise_bound``.

        Returns
        -------
        MaskedUpdate
            ``Enc(C_LCM sum_u w_{s,u} E_{s,u} + Z_s + masks)`` for every parameter.

        Raises
        ------
        MessageRejectedError
            If the message is not acceptable now (wrong round, replay, malformed ciphertexts).
        ParameterError
            If ``deltas`` has the wrong shape or exceeds the session's bounds, or ``noise_std``
            is invalid.
        NoiseTailError
            If a noise draw exceeds 16 standard deviations (probability below ``e^-128``).
        """
        msg = self._accept(message)
        assert isinstance(msg, EncryptedWeights)
        p = self.params
        d = np.asarray(deltas, dtype=np.float64)
        if d.shape != (p.n_users, p.n_params):
            raise ParameterError("deltas", f"must have shape ({p.n_users}, {p.n_params})")
        exps = encode(d, p.precision, p.clip_bound, p.delta_max, "deltas")
        noise = sample_noise(noise_std, p.precision, p.c_lcm, p.noise_bound, p.n_params)
        pk = self.public_key
        if len(msg.ciphertexts) != p.n_users:
            raise MalformedMessageError(f"expected {p.n_users} encrypted weights")
        weights = [mpz(c) for c in msg.ciphertexts]
        if not all(pk.is_ciphertext(c) for c in weights):
            raise MalformedMessageError("an encrypted weight is not in Z_{n^2}^*")

        if self._tables is None:
            self._tables = WeightTables(pk.n_square, p.exponent_bits, self._window, self._executor)
        tables = self._tables.tables(weights, self._scalars)
        products = weighted_products(tables, exps, p.offset_bits, pk.n_square, self._executor)
        n2, n = pk.n_square, pk.n_mpz

        session = p.session_id
        keys = {
            peer: round_mask_key(agreement, session, msg.header.round_index, self.silo, peer)
            for peer, agreement in self._agreements.items()
        }
        masks = pairwise_mask_totals(self.silo, keys, n, p.n_params)
        if p.rerandomise and len(self._randomisers) < p.n_params:
            self.precompute_randomisers(p.n_params - len(self._randomisers))
        out = []
        for j in range(p.n_params):
            plain = (noise[j] + masks[j]) % n
            c = products[j] * (1 + plain * n) % n2
            if p.rerandomise:
                c = c * self._randomisers.popleft() % n2
            out.append(int(c))
        self.last_round = msg.header.round_index
        self._last_noise = tuple(noise)
        self.received.append(msg)
        return MaskedUpdate(
            self._to_server(MessageKind.MASKED_UPDATE, msg.header.round_index), tuple(out)
        )
