"""A client's protocol state as bytes, so that a round can span several processes.

Under Flower a node's ClientApp may run in a fresh process for each stage of the protocol:
:func:`dump_client` writes everything a :class:`SecAggClient` keeps between stages to bytes and
:func:`load_client` restores it. The encoding, all integers big-endian::

    magic "FPSS" | version (1) | session id (16) | round (8) | user (4) | stage (1)
    | SHA-256 of the encoded parameters (32)
    | c_sk (32) | s_sk (32) | self-mask seed b_u (32)
    | neighbour count (4) | (neighbour (4) | c_pk (32) | s_pk (32))...
    | held count (4) | (owner (4) | length (2) | share of b | length (2) | share of s_sk)...
      (length 0 and no share of s_sk from a neighbour that reuses its keys)
    | timing count (4) | (name length (2) | stage name (UTF-8) | seconds (f64))...
    | consistency check (1: 0 off, 1 on, 2 on and signed)
    | if signed: count (4) | user (4)...  (the aggregated set it signed, strictly ascending)
    | removable noise (:mod:`fedprivacy.secagg.state_noise`; one zero byte without)
    | reused keys (1: 0 fresh keys, 1 keys of a :mod:`~fedprivacy.secagg.key_epoch`)
    | model digest length (1: 0 or 32) | model digest (the model the masked update was
      trained on, from the masked input on; it binds the pairwise masks and the signed set)

The private keys are raw X25519 scalars, the shares :meth:`Share.to_bytes
<fedprivacy.crypto.shamir.Share.to_bytes>`; neighbours and owners are strictly ascending. The
timings (:attr:`SecAggClient.seconds`) are kept too, so a restored client reports the time of
every stage of the round. The consistency byte records whether the client runs the
survivor-list consistency check (:mod:`fedprivacy.secagg.consistency`) and the set it signed,
so that a restored client refuses a second set exactly as the original would; its signing key
and roster are not in the state (the node reads them from its own files at every stage).

The state is bound to its round: loading it with parameters of another session, round or
user, or with parameters that differ in any field (the digest of :func:`encode_params
<fedprivacy.secagg.params_wire.encode_params>` covers them all, so that a server cannot change
the threshold or the neighbour graph between two stages), raises :class:`WrongRoundError`.
Anything malformed raises :class:`MalformedMessageError`.

**Security.** The state holds the client's private keys and its self-mask seed: whoever reads
it can unmask the client's input. It must stay on the node, like the key material itself (a
Flower ClientApp's ``context.state`` is kept at the SuperNode and never sent to the SuperLink);
never put it in a message.
"""

from __future__ import annotations

import math
import struct

from fedprivacy.crypto.keys import KEY_BYTES
from fedprivacy.crypto.shamir import Share
from fedprivacy.errors import InvalidKeyError, ShamirError
from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.errors import MalformedMessageError, WrongRoundError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.params_wire import params_digest
from fedprivacy.secagg.snapshot import SEED_BYTES, ClientSnapshot, ClientStage
from fedprivacy.secagg.state_noise import noise_bytes, read_noise
from fedprivacy.wire import MessageFormat, WireReader

__all__ = ["MAGIC", "VERSION", "dump_client", "load_client"]

MAGIC = b"FPSS"
VERSION = 3
_DIGEST_BYTES = 32
_FORMAT = MessageFormat(
    MAGIC,
    VERSION,
    struct.Struct(f">4sB16sQIB{_DIGEST_BYTES}s"),
    "fedprivacy secure aggregation client state",
    MalformedMessageError,
)
_F64 = struct.Struct(">d")


def dump_client(client: SecAggClient) -> bytes:
    """Write a client's state between two stages to bytes.

    Parameters
    ----------
    client : SecAggClient
        The client, in any stage.

    Returns
    -------
    bytes
        The encoding of the module docstring, read back by :func:`load_client`. Secret: it
        holds the private keys and the self-mask seed, and must not leave the node.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> from fedprivacy.secagg import SecAggParameters
    >>> codec = FixedPointCodec.for_sum(1.0, 5, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(5), 3, codec)
    >>> client = SecAggClient(params, 2)
    >>> advert = client.advertise_keys()
    >>> data = dump_client(client)
    >>> data[:4], len(data)
    (b'FPSS', 202)
    """
    snap = client._snapshot()
    p = client.params
    parts = [
        _FORMAT.pack_header(
            p.session_id,
            p.round_index,
            snap.user,
            int(snap.stage),
            params_digest(p),
        ),
        snap.encryption_key,
        snap.masking_key,
        snap.seed,
        struct.pack(">I", len(snap.neighbour_keys)),
    ]
    for v in sorted(snap.neighbour_keys):
        c_pk, s_pk = snap.neighbour_keys[v]
        parts += [struct.pack(">I", v), c_pk, s_pk]
    parts.append(struct.pack(">I", len(snap.held)))
    for v in sorted(snap.held):
        seed_share, key_share = (b"" if s is None else s.to_bytes() for s in snap.held[v])
        parts += [struct.pack(">IH", v, len(seed_share)), seed_share]
        parts += [struct.pack(">H", len(key_share)), key_share]
    parts.append(struct.pack(">I", len(snap.seconds)))
    for name, seconds in snap.seconds.items():
        raw = name.encode("utf-8")
        parts += [struct.pack(">H", len(raw)), raw, _F64.pack(seconds)]
    if snap.signed is None:
        parts.append(bytes([int(snap.consistency)]))
    else:
        parts += [bytes([2]), struct.pack(f">I{len(snap.signed)}I", len(snap.signed), *snap.signed)]
    parts += noise_bytes(snap.noise)
    parts += [bytes([int(snap.reusing), len(snap.model)]), snap.model]
    return b"".join(parts)


def _ascending(users: list[int], what: str) -> None:
    if any(a >= b for a, b in zip(users, users[1:], strict=False)):
        raise MalformedMessageError(f"the {what} are not in strictly ascending order")


def _optional_share(r: WireReader, what: str) -> Share | None:
    """A share, or None for length 0 (a neighbour that reuses its keys shares no key)."""
    length = r.u16(f"{what} length")
    return _parse_share(r.take(length, what), what) if length else None


def _share(r: WireReader, what: str) -> Share:
    return _parse_share(r.take(r.u16(f"{what} length"), what), what)


def _parse_share(raw: bytes, what: str) -> Share:
    try:
        return Share.from_bytes(raw)
    except ShamirError as exc:
        raise MalformedMessageError(f"bad {what}: {exc}") from exc


def _signed_set(r: WireReader) -> tuple[bool, tuple[int, ...] | None]:
    """The consistency byte and, if the client signed, the set it signed."""
    flag = r.u8("consistency flag")
    if flag > 2:
        raise MalformedMessageError(f"unknown consistency flag {flag}")
    if flag < 2:
        return bool(flag), None
    users = [r.u32("signed user") for _ in range(r.count("signed users"))]
    if not users:
        raise MalformedMessageError("an empty signed set")
    _ascending(users, "signed users")
    return True, tuple(users)


def _parse(data: bytes) -> tuple[bytes, int, bytes, ClientSnapshot]:
    """Session id, round, parameter digest and snapshot; only the format is checked."""
    (session_id, round_index, user, stage_code, digest), r = _FORMAT.unpack_header(data)
    try:
        stage = ClientStage(stage_code)
    except ValueError:
        raise MalformedMessageError(f"unknown client stage {stage_code}") from None
    enc = r.take(KEY_BYTES, "c_sk")
    mask = r.take(KEY_BYTES, "s_sk")
    seed = r.take(SEED_BYTES, "self-mask seed")
    neighbour_keys: dict[int, tuple[bytes, bytes]] = {}
    order = []
    for _ in range(r.count("neighbours")):
        v = r.u32("neighbour")
        order.append(v)
        neighbour_keys[v] = (r.take(KEY_BYTES, "c_pk"), r.take(KEY_BYTES, "s_pk"))
    _ascending(order, "neighbours")
    held: dict[int, tuple[Share, Share | None]] = {}
    order = []
    for _ in range(r.count("held shares")):
        v = r.u32("share owner")
        order.append(v)
        held[v] = (_share(r, "share of b"), _optional_share(r, "share of s_sk"))
    _ascending(order, "share owners")
    seconds = _timings(r)
    consistency, signed = _signed_set(r)
    noise = read_noise(r)
    reusing = r.u8("reused keys flag")
    if reusing > 1:
        raise MalformedMessageError(f"unknown reused keys flag {reusing}")
    model = r.take(r.u8("model digest length"), "model digest")
    if len(model) not in (0, _DIGEST_BYTES):
        raise MalformedMessageError(f"a model digest of {len(model)} bytes")
    r.finish()
    snap = ClientSnapshot(
        user,
        stage,
        enc,
        mask,
        seed,
        neighbour_keys,
        held,
        seconds,
        consistency=consistency,
        signed=signed,
        noise=noise,
        reusing=bool(reusing),
        model=model,
    )
    _check_stage(snap)
    return session_id, round_index, digest, snap


def _timings(r: WireReader) -> dict[str, float]:
    """The client's seconds by stage name (names unique, values finite and >= 0)."""
    seconds: dict[str, float] = {}
    for _ in range(r.count("timings")):
        try:
            name = r.take(r.u16("stage name length"), "stage name").decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedMessageError("a stage name is not UTF-8") from None
        (value,) = _F64.unpack(r.take(_F64.size, "seconds"))
        if name in seconds or not math.isfinite(value) or value < 0:
            raise MalformedMessageError(f"bad timing {name!r}: {value!r}")
        seconds[name] = value
    return seconds


def _check_stage(snap: ClientSnapshot) -> None:
    """Refuse a snapshot holding what its stage cannot have yet (or ever)."""
    stage, neighbour_keys, held = snap.stage, snap.neighbour_keys, snap.held
    if stage <= ClientStage.ADVERTISED and neighbour_keys:
        raise MalformedMessageError(f"neighbour keys before the roster (stage {stage.name})")
    if stage is not ClientStage.MASKED and held:
        raise MalformedMessageError(f"held shares in stage {stage.name}")
    if snap.user in neighbour_keys:
        raise MalformedMessageError(f"user {snap.user} is listed as its own neighbour")
    if not set(held) <= set(neighbour_keys):
        raise MalformedMessageError("shares held from users that are not neighbours")
    if snap.signed is not None and stage < ClientStage.MASKED:
        raise MalformedMessageError(f"a signed aggregated set in stage {stage.name}")
    if snap.noise is not None and stage is not ClientStage.MASKED:
        raise MalformedMessageError(f"removable noise in stage {stage.name}")


def load_client(
    params: SecAggParameters,
    data: bytes,
    *,
    user: int | None = None,
    consistency: ConsistencyCheck | None = None,
) -> SecAggClient:
    """Restore a client written by :func:`dump_client`.

    Parameters
    ----------
    params : SecAggParameters
        The round's parameters (for example :func:`decode_params
        <fedprivacy.secagg.params_wire.decode_params>` of the server's message); they must
        equal those the state was written with.
    data : bytes
        The state.
    user : int, optional
        The id this node expects to be; state of another user is then refused.
    consistency : ConsistencyCheck, optional
        The node's signing key and roster, required exactly when the state was written by a
        client with the consistency check.

    Returns
    -------
    SecAggClient
        A client in the stage, with the keys, seed, neighbour keys, shares and timings, of the
        one dumped: it answers (and refuses) every message exactly as that one would.

    Raises
    ------
    MalformedMessageError
        If ``data`` deviates from the format (see the module docstring): truncated, trailing
        bytes, another magic or version, an unknown stage, a bad share, entries out of order,
        or contents impossible in its stage.
    WrongRoundError
        If the state belongs to another session, round or user, or was written with parameters
        that differ from ``params``.
    ConsistencyError
        If the state was written with the consistency check and ``consistency`` is None, or
        the other way round.
    ParameterError
        If ``consistency``'s roster does not list this user with its signing key.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> from fedprivacy.secagg import SecAggParameters
    >>> codec = FixedPointCodec.for_sum(1.0, 5, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(5), 3, codec)
    >>> client = SecAggClient(params, 2)
    >>> advert = client.advertise_keys()
    >>> data = dump_client(client)
    >>> restored = load_client(params, data, user=2)
    >>> restored.user, restored.stage.name
    (2, 'ADVERTISED')
    >>> restored.advertise_keys()
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.OutOfOrderError: keys were already advertised
    >>> next_round = SecAggParameters.create(bytes(16), 1, range(5), 3, codec)
    >>> load_client(next_round, data)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.WrongRoundError: state of round 0 of another session or round; ...
    """
    session_id, round_index, digest, snap = _parse(data)
    if session_id != params.session_id or round_index != params.round_index:
        raise WrongRoundError(
            f"state of round {round_index} of another session or round; the parameters are of "
            f"round {params.round_index}"
        )
    if user is not None and snap.user != user:
        raise WrongRoundError(f"state of user {snap.user}, not of user {user}")
    if snap.user not in params.participants:
        raise WrongRoundError(f"user {snap.user} is not a participant of this round")
    if digest != params_digest(params):
        raise WrongRoundError("the state was written with other parameters of this round")
    x = params.share_point(snap.user)
    if not set(snap.neighbour_keys) <= params.neighbours[snap.user] or any(
        share.x != x for pair in snap.held.values() for share in pair if share is not None
    ):
        raise MalformedMessageError("neighbours or shares do not match this user's")
    if not set(snap.signed or ()) <= set(params.participants):
        raise MalformedMessageError("the signed set names users who are not participants")
    if snap.noise is not None and any(len(c) != params.dimension for c in snap.noise[1]):
        raise MalformedMessageError("the kept noise does not have the round's dimension")
    try:
        return SecAggClient._restore(params, snap, consistency)
    except InvalidKeyError as exc:  # pragma: no cover - every 32-byte string is a valid key
        raise MalformedMessageError(f"bad private key: {exc}") from exc
