"""The private weighting protocol of ULDP-FL (Protocol 1 of Kato et al.).

ULDP-AVG-w weights user ``u``'s clipped delta in silo ``s`` by ``w_{s,u} = n_{s,u} / N_u``, but
the per-user record counts are private against the server and the other silos. Protocol 1
computes ``sum_s sum_u w_{s,u} Delta_{s,u} + noise`` without revealing them:

* setup: the server's Paillier key (:mod:`fedprivacy.crypto.paillier`); pairwise X25519 keys
  between silos, relayed by the server; a seed ``R`` from silo 0, sent under AES-GCM with the
  pairwise keys; multiplicative blinds ``r_u`` from ``R``; blinded histograms
  ``r_u n_{s,u}`` plus pairwise masks; the server sums them to ``B(N_u) = r_u N_u`` and inverts;
* each round: the server encrypts ``B_inv(N_u)`` (0 for users outside the sub-sample); each silo
  raises it to ``n_{s,u} r_u C_LCM E`` (``E`` the fixed-point delta), adds its
  own discrete Gaussian noise on the plaintext's integer grid (OS randomness, :mod:`.noise`; not
  the paper's ``C_LCM`` times encoded noise, whose plaintext residue modulo ``C_LCM`` is
  noise-free) and pairwise masks; the server multiplies, decrypts and decodes.

Where each step of Protocol 1 lives:

====== ===================================================================================
1(a)   ``PrivateWeightingServer.start_setup`` (Paillier key, ``PaillierKeyAnnouncement``);
       ``PrivateWeightingSilo.on_paillier_key`` (range check, X25519 ``DhPublicKey``);
       ``C_LCM`` is ``PrivateWeightingParameters.c_lcm``
1(b)   ``server.finish_keys`` (``DhRoster``); ``silo.on_roster`` (pairwise agreements)
1(c)   silo 0's ``on_roster`` (``SeedShares``: AES-GCM under HKDF of each agreement);
       ``server.finish_seed`` (``SeedDelivery``); ``silo.on_seed_delivery`` (decryption)
1(d)   ``silo.blinded_histogram``: ``r_u`` uniform in ``Z_n^*`` from the PRG keyed by ``R``
1(e)   the same method adds the pairwise masks (``BlindedHistogram``); the server sums
       them in ``finish_histograms``
1(f)   ``server.finish_histograms``: ``B(N_u)^-1 mod n``
2(a)   ``server.start_round``: ``Enc(B_inv(N_u))`` or ``Enc(0)`` (``EncryptedWeights``)
2(b)   ``silo.on_weights``: ``Enc(B_inv)^(n_{s,u} r_u C_LCM E)`` via fixed-base tables
       (:mod:`.weighting`), plus the silo's noise ``Z_s`` (:mod:`.noise`)
2(c)   the same method adds the round's pairwise masks (``MaskedUpdate``);
       ``server.finish_round`` multiplies, decrypts (CRT) and decodes
====== ===================================================================================

Typical use in training (the aggregate is ``sum_s Delta_t^s``; divide by ``|U||S|``, or
``q|U||S|`` with sub-sampling, as Algorithms 3 and 4 do)::

    with SecureWeighting(histogram, n_params=d, clip_bound=C, subsampling=q < 1) as sw:
        sw.setup()
        for t in range(T):
            agg, seconds = sw.aggregate(t, deltas_per_silo, sigma * C / sqrt(S), sampled)
            deviation = np.abs(agg - sw.plaintext_reference(deltas_per_silo, sampled)).max()

Modules: :mod:`.params` (public parameters, the correctness conditions), :mod:`.messages`
(typed wire messages), :mod:`.server` and :mod:`.silo` (the parties' state machines),
:mod:`.protocol` (in-process driver), :mod:`.secure_weighting` (the one-object API for training).
"""

from fedprivacy.secagg.private_weighting.errors import (
    AggregateOutOfRangeError,
    DuplicateMessageError,
    MalformedMessageError,
    MessageRejectedError,
    MissingMessagesError,
    NotInvertibleError,
    OutOfOrderError,
    PlaintextRangeError,
    PrivateWeightingError,
    RecordLimitError,
    UnknownSenderError,
    WrongRoundError,
    WrongSessionError,
)
from fedprivacy.secagg.private_weighting.noise import NoiseTailError
from fedprivacy.secagg.private_weighting.params import (
    DEFAULT_N_MAX,
    DEFAULT_PRECISION,
    PrivateWeightingParameters,
    largest_feasible_n_max,
    lcm_upto,
)
from fedprivacy.secagg.private_weighting.protocol import (
    RoundOutcome,
    SetupOutcome,
    phase_seconds,
    run_round,
    run_setup,
)
from fedprivacy.secagg.private_weighting.secure_weighting import SecureWeighting
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.secagg.private_weighting.silo import PrivateWeightingSilo

__all__ = [
    "DEFAULT_N_MAX",
    "DEFAULT_PRECISION",
    "AggregateOutOfRangeError",
    "DuplicateMessageError",
    "MalformedMessageError",
    "MessageRejectedError",
    "MissingMessagesError",
    "NoiseTailError",
    "NotInvertibleError",
    "OutOfOrderError",
    "PlaintextRangeError",
    "PrivateWeightingError",
    "PrivateWeightingParameters",
    "PrivateWeightingServer",
    "PrivateWeightingSilo",
    "RecordLimitError",
    "RoundOutcome",
    "SecureWeighting",
    "SetupOutcome",
    "UnknownSenderError",
    "WrongRoundError",
    "WrongSessionError",
    "largest_feasible_n_max",
    "lcm_upto",
    "phase_seconds",
    "run_round",
    "run_setup",
]
