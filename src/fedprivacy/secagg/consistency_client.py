"""The consistency stage of :class:`~fedprivacy.secagg.client.SecAggClient` (a mixin).

Between its masked input and the unmasking, a client with the consistency check signs the
aggregated set the server will unmask, once per round (:mod:`fedprivacy.secagg.consistency`);
the server's side is :mod:`fedprivacy.secagg.consistency_server`.
"""

from __future__ import annotations

import time
from typing import Protocol

from fedprivacy.crypto.shamir import Share
from fedprivacy.secagg.consistency import (
    ConsistencyCheck,
    check_aggregated,
    check_signable,
    refuse_second_set,
)
from fedprivacy.secagg.errors import DuplicateMessageError, OutOfOrderError
from fedprivacy.secagg.messages import (
    ConsistencyRequest,
    ConsistencyResponse,
    Header,
    Message,
    MessageKind,
)
from fedprivacy.secagg.params import SecAggParameters

__all__ = ["ClientConsistency"]


class _Client(Protocol):
    """What :class:`ClientConsistency` uses of :class:`~fedprivacy.secagg.client.SecAggClient`."""

    params: SecAggParameters
    user: int
    _check: ConsistencyCheck | None
    _signed: tuple[int, ...] | None
    _held: dict[int, tuple[Share, Share | None]]
    _model: bytes

    def _accept(self, message: Message | bytes, kind: MessageKind) -> Message: ...

    def _decode(self, message: Message | bytes) -> Message: ...

    def _to_server(self, kind: MessageKind) -> Header: ...

    def _timed(self, name: str, start: float) -> None: ...


class ClientConsistency:
    """The client's consistency stage: :meth:`sign_survivors`."""

    _signed: tuple[int, ...] | None  # SecAggClient's: the set this client signed, if any

    def sign_survivors(self: _Client, request: ConsistencyRequest | bytes) -> ConsistencyResponse:
        """Consistency check: sign the aggregated set ``S``, once per round.

        The set is checked as :meth:`~fedprivacy.secagg.client.SecAggClient.unmask` checks it,
        and every neighbour in it must be one whose shares this client received
        (:func:`check_signable <fedprivacy.secagg.consistency.check_signable>`). The signed
        statement names the digest of the model the client trained on, if any.

        Parameters
        ----------
        request : ConsistencyRequest or bytes
            The set the server will unmask.

        Returns
        -------
        ConsistencyResponse
            This client's signature on the round's statement for ``S``.

        Raises
        ------
        ConsistencyError
            If this client already signed another set in this round (the same set again is a
            :class:`DuplicateMessageError`), or ``S`` names a neighbour whose shares never
            arrived.
        OutOfOrderError
            If the client runs without the check, or is not in stage MASKED.

        """
        start = time.perf_counter()
        if self._check is None:
            raise OutOfOrderError("this client runs without the consistency check")
        try:
            msg = self._accept(request, MessageKind.CONSISTENCY_REQUEST)
        except DuplicateMessageError:
            refuse_second_set(self._signed, self._decode(request))
            raise
        assert isinstance(msg, ConsistencyRequest)
        aggregated = check_aggregated(self.params, msg.aggregated)
        check_signable(self.params, self.user, self._held, aggregated)
        signature = self._check.sign(self.params, aggregated, self._model)
        self._signed = tuple(sorted(aggregated))
        self._timed("sign_survivors", start)
        header = self._to_server(MessageKind.CONSISTENCY_RESPONSE)
        return ConsistencyResponse(header, signature)
