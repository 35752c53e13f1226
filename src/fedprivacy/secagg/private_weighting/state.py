"""A silo's state and the session's parameters as bytes, so that Protocol 1 can span processes.

Under Flower a silo's ClientApp may run in a fresh process for every message: :func:`dump_silo`
writes what a :class:`~fedprivacy.secagg.private_weighting.silo.PrivateWeightingSilo` keeps between
messages and :func:`load_silo` restores it; :func:`encode_params` and :func:`decode_params` carry
the session's public parameters in the server's first message. The encodings, all integers
big-endian, integer lists as in :mod:`.messages` (``width | count | fixed-width values``)::

    parameters: magic "FPWP" | version (1) | session id (16) | silos (4) | users (4)
                | parameters (4) | clip (f64) | noise bound (f64) | key bits (4)
                | precision (f64) | N_max (4) | flags (1: subsampling 1, rerandomise 2,
                insecure small key 4)
    silo state: magic "FPWS" | version (1) | session id (16) | silo (4) | stage (1)
                | last round + 1 (8; 0: none) | SHA-256 of the encoded parameters (32)
                | X25519 private key (32) | seed flag (1) | seed (32, if the flag is 1)
                | agreement count (4) | (peer (4) | agreement (32))... (peers ascending)
                | Paillier modulus (list of one, empty before 1(a)) | k_u (list, empty before
                1(d)) | records n_{s,u} (list)

Caches (the fixed-base tables, the pool of encryptions of zero) are not kept: a restored silo
rebuilds them, which is the cost of a fresh process.

**Security.** The state holds the silo's X25519 private key, its pairwise agreements (which
unmask its inputs), the shared seed ``R`` (during setup) and the scalars
``k_u = n_{s,u} r_u C_LCM``: it must stay on the silo, like the records themselves (a Flower
ClientApp's ``context.state`` is kept at the SuperNode).

Examples
--------
>>> import numpy as np
>>> params = PrivateWeightingParameters(bytes(16), 2, 3, 4, 1.0, 1.0, key_bits=512,
...                                     n_max=5, insecure_small_key=True)
>>> decode_params(encode_params(params)) == params
True
>>> silo = PrivateWeightingSilo(params, 1, np.array([1, 0, 2]))
>>> again = load_silo(params, dump_silo(silo), silo=1)
>>> (again.stage.name, again.silo)
('NEW', 1)
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np
from gmpy2 import mpz

from fedprivacy.crypto.keys import KEY_BYTES, keypair_from_private_bytes, private_key_bytes
from fedprivacy.crypto.paillier_public import PaillierPublicKey
from fedprivacy.errors import FedPrivacyError, InvalidKeyError
from fedprivacy.secagg.private_weighting.errors import MalformedMessageError, WrongSessionError
from fedprivacy.secagg.private_weighting.messages import pack_integers, read_integers
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.silo import PrivateWeightingSilo
from fedprivacy.secagg.private_weighting.silo_setup import SEED_BYTES, SiloStage
from fedprivacy.wire import MessageFormat

__all__ = ["decode_params", "dump_silo", "encode_params", "load_silo"]

_PARAMS = MessageFormat(
    b"FPWP",
    1,
    struct.Struct(">4sB16sIIIddIdIB"),
    "private weighting parameters",
    MalformedMessageError,
)
_STATE = MessageFormat(
    b"FPWS",
    1,
    struct.Struct(">4sB16sIBQ32s"),
    "private weighting silo state",
    MalformedMessageError,
)
_FLAGS = ("subsampling", "rerandomise", "insecure_small_key")


def encode_params(params: PrivateWeightingParameters) -> bytes:
    """Serialise a session's public parameters (every field; read back by :func:`decode_params`)."""
    flags = sum(1 << i for i, name in enumerate(_FLAGS) if getattr(params, name))
    return _PARAMS.pack_header(
        params.session_id,
        params.n_silos,
        params.n_users,
        params.n_params,
        params.clip_bound,
        params.noise_bound,
        params.key_bits,
        params.precision,
        params.n_max,
        flags,
    )


def decode_params(data: bytes) -> PrivateWeightingParameters:
    """Parse :func:`encode_params`'s bytes.

    Raises
    ------
    MalformedMessageError
        If the bytes deviate from the format (or carry unknown flags).
    ParameterError, PlaintextRangeError
        If the fields parse but do not make valid parameters.
    """
    fields, r = _PARAMS.unpack_header(data)
    r.finish()
    *values, flags = fields
    if flags >> len(_FLAGS):
        raise MalformedMessageError(f"unknown parameter flags {flags:#x}")
    names = "session_id n_silos n_users n_params clip_bound noise_bound key_bits precision n_max"
    kwargs: dict[str, Any] = dict(zip(names.split(), values, strict=True))
    kwargs.update({name: bool(flags >> i & 1) for i, name in enumerate(_FLAGS)})
    return PrivateWeightingParameters(**kwargs)


def _digest(params: PrivateWeightingParameters) -> bytes:
    return hashlib.sha256(encode_params(params)).digest()


def dump_silo(silo: PrivateWeightingSilo) -> bytes:
    """Write a silo's state between two messages to bytes (secret: it must stay on the silo)."""
    p = silo.params
    last = 0 if silo.last_round is None else silo.last_round + 1
    parts = [
        _STATE.pack_header(p.session_id, silo.silo, int(silo.stage), last, _digest(p)),
        private_key_bytes(silo._keypair.private),
        b"\x00" if silo._seed is None else b"\x01" + silo._seed,
        struct.pack(">I", len(silo._agreements)),
    ]
    for peer in sorted(silo._agreements):
        parts += [struct.pack(">I", peer), silo._agreements[peer]]
    modulus = () if silo._public is None else (int(silo._public.n),)
    parts += [
        pack_integers(modulus),
        pack_integers(tuple(int(k) for k in silo._scalars)),
        pack_integers(tuple(silo._records)),
    ]
    return b"".join(parts)


def load_silo(
    params: PrivateWeightingParameters,
    data: bytes,
    *,
    silo: int,
    seed_source: Callable[[int], bytes] | None = None,
    executor: Executor | None = None,
) -> PrivateWeightingSilo:
    """Restore a silo written by :func:`dump_silo`.

    Parameters
    ----------
    params : PrivateWeightingParameters
        The session's parameters; they must equal those the state was written with.
    data : bytes
        The state.
    silo : int
        The silo this node is; the state of another silo is refused.
    seed_source, executor
        As for :class:`PrivateWeightingSilo`.

    Returns
    -------
    PrivateWeightingSilo
        A silo in the stage, with the keys, agreements, seed and scalars of the one dumped.

    Raises
    ------
    MalformedMessageError
        If ``data`` deviates from the format or holds contents impossible in its stage.
    WrongSessionError
        If the state belongs to another session or silo, or to other parameters.
    """
    (session, who, stage_code, last, digest), r = _STATE.unpack_header(data)
    if session != params.session_id or digest != _digest(params) or who != silo:
        raise WrongSessionError("the stored silo state belongs to another session or silo")
    try:
        stage = SiloStage(stage_code)
    except ValueError:
        raise MalformedMessageError(f"unknown silo stage {stage_code}") from None
    private = r.take(KEY_BYTES, "X25519 private key")
    seed = r.take(SEED_BYTES, "seed") if r.u8("seed flag") == 1 else None
    agreements: dict[int, bytes] = {}
    for _ in range(r.count("agreements")):
        peer = r.u32("peer")
        if agreements and peer <= max(agreements):
            raise MalformedMessageError("the agreements are not in ascending order")
        agreements[peer] = r.take(KEY_BYTES, "agreement")
    modulus = read_integers(r, "modulus")
    scalars = read_integers(r, "scalars")
    records = read_integers(r, "records")
    r.finish()
    _check_stage(stage, modulus, scalars, seed)
    kw: dict[str, Any] = {"executor": executor}
    if seed_source is not None:
        kw["seed_source"] = seed_source
    out = PrivateWeightingSilo(params, silo, np.array(records, dtype=np.int64), **kw)
    try:
        out._keypair = keypair_from_private_bytes(private)
        out._public = PaillierPublicKey(modulus[0]) if modulus else None
    except (InvalidKeyError, FedPrivacyError) as exc:
        raise MalformedMessageError(f"bad key in the silo state: {exc}") from exc
    out._agreements = agreements
    out._seed = seed
    out._scalars = [mpz(k) for k in scalars]
    out.stage = stage
    out.last_round = None if last == 0 else last - 1
    return out


def _check_stage(
    stage: SiloStage, modulus: tuple[int, ...], scalars: tuple[int, ...], seed: bytes | None
) -> None:
    if (stage is SiloStage.NEW) != (not modulus):
        raise MalformedMessageError(f"the Paillier key does not match stage {stage.name}")
    if (stage is SiloStage.READY) != bool(scalars):
        raise MalformedMessageError(f"the scalars k_u do not match stage {stage.name}")
    if seed is not None and stage is not SiloStage.ROSTER and stage is not SiloStage.SEEDED:
        raise MalformedMessageError(f"a seed in stage {stage.name}")
