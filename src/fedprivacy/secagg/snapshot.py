"""What a secure-aggregation client keeps between stages: its stage and its snapshot.

:class:`~fedprivacy.secagg.client.SecAggClient` produces a :class:`ClientSnapshot`, and
:mod:`fedprivacy.secagg.state` writes it to bytes and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from fedprivacy.crypto.shamir import Share

if TYPE_CHECKING:
    from fedprivacy.dp.noise_modes import NoiseDraw
    from fedprivacy.dp.party_noise import Components

__all__ = ["SEED_BYTES", "ClientSnapshot", "ClientStage"]

SEED_BYTES = 32


class ClientStage(IntEnum):
    """Where a client is in the round; each message moves it one stage on."""

    NEW = 0
    ADVERTISED = 1
    SHARED = 2
    MASKED = 3
    DONE = 4


@dataclass(frozen=True)
class ClientSnapshot:
    """Everything a :class:`SecAggClient` keeps between stages.

    :mod:`fedprivacy.secagg.state` writes it to bytes. Secret: it holds the private keys and the
    self-mask seed.

    Attributes
    ----------
    user : int
        The client's id.
    stage : ClientStage
        Where the client is in the round.
    encryption_key, masking_key : bytes
        The raw 32-byte X25519 private keys ``c_sk`` and ``s_sk``.
    seed : bytes
        The self-mask seed ``b_u``.
    neighbour_keys : dict of int to (bytes, bytes)
        The public keys ``(c_pk, s_pk)`` of the neighbours that advertised (from stage 1 on).
    held : dict of int to (Share, Share)
        The shares of ``b_v`` and ``s_sk_v`` received from each neighbour (stage 2 to 3); no
        share of ``s_sk_v`` from a neighbour that reuses its keys.
    seconds : dict of str to float
        The time spent in each stage so far.
    consistency : bool
        Whether the client runs the consistency check (its node's signing material is not
        part of the snapshot: the node supplies it again when it restores the client).
    signed : tuple of int or None
        The aggregated set the client signed in the consistency check, ascending.

    noise : tuple of (NoiseDraw, list of int vectors) or None
        The exact noise mode, from the masked input to the unmask reply: the draw and the
        components the client added (secret: they remove its noise).
    reusing : bool
        Whether the client's keys serve several rounds (:mod:`fedprivacy.secagg.key_epoch`):
        it then shares no masking key.
    model : bytes
        The digest of the model the masked update was trained on (empty: none given).
    """

    user: int
    stage: ClientStage
    encryption_key: bytes
    masking_key: bytes
    seed: bytes
    neighbour_keys: dict[int, tuple[bytes, bytes]]
    held: dict[int, tuple[Share, Share | None]]
    seconds: dict[str, float]
    consistency: bool = False
    signed: tuple[int, ...] | None = None
    noise: tuple[NoiseDraw, Components] | None = None
    reusing: bool = False
    model: bytes = b""
