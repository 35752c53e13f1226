"""The server's side of the consistency check (:mod:`fedprivacy.secagg.consistency`).

:class:`ServerConsistency` is a mixin of :class:`~fedprivacy.secagg.server.SecAggServer`: its
stage between the masked inputs and the unmasking. :class:`SignatureCollector` verifies and
keeps the clients' signatures.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from fedprivacy.crypto.signing import Roster
from fedprivacy.secagg.consistency import Signatures, consistency_quorum, verify_signature
from fedprivacy.secagg.derivation import survivors_statement
from fedprivacy.secagg.errors import (
    DuplicateMessageError,
    OutOfOrderError,
    RoundAbortedError,
    UnknownSenderError,
)
from fedprivacy.secagg.messages import (
    ConsistencyRequest,
    ConsistencyResponse,
    Header,
    MessageKind,
    ServerStage,
    ShareKind,
    UnmaskRequest,
)
from fedprivacy.secagg.params import SecAggParameters

if TYPE_CHECKING:
    from fedprivacy.crypto.shamir import Share

__all__ = ["ServerConsistency", "SignatureCollector"]


class SignatureCollector:
    """The server's side of the check: whom it asked and the signatures that verified.

    Parameters
    ----------
    params : SecAggParameters
        The round.
    roster : Roster
        The participants' public keys (the server verifies each signature on arrival, so that
        one bad client cannot make every honest client refuse the unmask request).
    aggregated : frozenset of int
        ``S``.
    asked : frozenset of int
        The users asked to sign (U3).
    model : bytes
        The digest of the model the server sent (empty: none): the signed statement's.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> from fedprivacy.crypto.signing import SigningKey
    >>> from fedprivacy.secagg.consistency import checks_for
    >>> codec = FixedPointCodec.for_sum(1, 3, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(3), 2, codec)
    >>> keys = {u: SigningKey.generate() for u in range(3)}
    >>> check = checks_for(keys)[1]
    >>> collector = SignatureCollector(params, check.roster, frozenset({0, 1}), frozenset(range(3)))
    >>> header = Header(MessageKind.CONSISTENCY_RESPONSE, bytes(16), 0, 1, 0xFFFFFFFF)
    >>> collector.add(ConsistencyResponse(header, check.sign(params, [0, 1])))
    >>> [signer for signer, _ in collector.signatures()], sorted(collector.signers)
    ([1], [1])
    """

    def __init__(
        self,
        params: SecAggParameters,
        roster: Roster,
        aggregated: frozenset[int],
        asked: frozenset[int],
        model: bytes = b"",
    ) -> None:
        self.params = params
        self.roster = roster
        self.aggregated = aggregated
        self.asked = asked
        self.closed = False
        self._statement = survivors_statement(params, aggregated, model)
        self._signatures: dict[int, bytes] = {}

    @property
    def signers(self) -> frozenset[int]:
        """The users whose signatures verified."""
        return frozenset(self._signatures)

    def add(self, message: ConsistencyResponse) -> None:
        """Verify and keep one signature.

        Raises
        ------
        UnknownSenderError
            If the sender was not asked to sign.
        DuplicateMessageError
            If it already signed.
        OutOfOrderError
            If the stage is closed (:meth:`SecAggServer.finish_consistency` was called).
        ConsistencyError
            If the signature does not verify under the sender's key.
        """
        sender = message.header.sender
        if sender not in self.asked:
            raise UnknownSenderError(f"{sender} was not asked to sign the aggregated set")
        if sender in self._signatures:
            raise DuplicateMessageError(f"a second consistency response from {sender}")
        if self.closed:
            raise OutOfOrderError(f"consistency response from {sender} after the stage closed")
        verify_signature(self.roster, sender, self._statement, message.signature)
        self._signatures[sender] = message.signature

    def signatures(self) -> Signatures:
        """The signatures of the members of ``S``, by signer (the unmask request carries some)."""
        return tuple((u, self._signatures[u]) for u in sorted(self.signers & self.aggregated))


class _Server(Protocol):
    """What :class:`ServerConsistency` uses of :class:`~fedprivacy.secagg.server.SecAggServer`."""

    params: SecAggParameters
    seconds: dict[str, float]
    model: bytes
    _aggregated: frozenset[int]
    _asked: frozenset[int]
    _responses: dict[int, dict[int, tuple[ShareKind, Share]]]
    _consistency: SignatureCollector | None

    def _expect(self, stage: ServerStage) -> None: ...

    def _abort(self, reason: str) -> RoundAbortedError: ...

    def _header(self, kind: MessageKind, recipient: int) -> Header: ...

    def _timed(self, name: str, start: float) -> None: ...


class ServerConsistency:
    """The consistency stage of :class:`~fedprivacy.secagg.server.SecAggServer` (a mixin).

    Between :meth:`finish_inputs <fedprivacy.secagg.server.SecAggServer.finish_inputs>` (whose
    unmask requests are then not sent) and the unmasking: :meth:`start_consistency`, the
    clients' :class:`ConsistencyResponse` messages through ``receive``, then
    :meth:`finish_consistency`. A server that never calls :meth:`start_consistency` runs the
    protocol without the check.
    """

    _consistency: SignatureCollector | None = None  # the check's signatures, once started
    _asked: frozenset[int]  # SecAggServer's: who may unmask

    def start_consistency(self: _Server, roster: Roster) -> dict[int, ConsistencyRequest]:
        """Ask every user of U3 to sign the aggregated set chosen by ``finish_inputs``.

        Parameters
        ----------
        roster : Roster
            The participants' public keys (the SuperNode authentication keys).

        Returns
        -------
        dict of int to ConsistencyRequest
            The message for each user in U3. Until :meth:`finish_consistency` no unmask
            response is accepted.

        Raises
        ------
        OutOfOrderError
            Unless called once, after ``finish_inputs`` and before any unmask response.

        """
        self._expect(ServerStage.UNMASK)
        if self._consistency is not None or self._responses:
            raise OutOfOrderError("the consistency check has already started, or unmasking has")
        start = time.perf_counter()
        check = SignatureCollector(self.params, roster, self._aggregated, self._asked, self.model)
        self._consistency = check
        self._asked = frozenset()  # no unmask response is accepted before finish_consistency
        ordered = tuple(sorted(self._aggregated))
        kind = MessageKind.CONSISTENCY_REQUEST
        out = {u: ConsistencyRequest(self._header(kind, u), ordered) for u in sorted(check.asked)}
        self._timed("start_consistency", start)
        return out

    def finish_consistency(self: _Server) -> dict[int, UnmaskRequest]:
        """Close the check: the unmask requests, with the signatures, for every user that signed.

        Returns
        -------
        dict of int to UnmaskRequest
            The aggregated set and the signatures of the first :func:`consistency_quorum`
            members (by id) that signed it, for each user whose signature verified (only they
            may unmask). More signatures would add nothing: each client checks every one it
            gets and needs exactly the quorum, so its cost is ``quorum`` verifications.

        Raises
        ------
        RoundAbortedError
            If fewer than :func:`consistency_quorum` members of the set signed it (the clients
            would refuse); the server is left in the ``ABORTED`` stage.
        OutOfOrderError
            Unless :meth:`start_consistency` was called and this was not.

        """
        self._expect(ServerStage.UNMASK)
        check = self._consistency
        if check is None or check.closed:
            raise OutOfOrderError("no consistency check to finish")
        start = time.perf_counter()
        check.closed = True
        signatures = check.signatures()
        quorum = consistency_quorum(self.params)
        if len(signatures) < quorum:
            raise self._abort(
                f"only {len(signatures)} members of the aggregated set signed it; the "
                f"consistency check needs {quorum}"
            )
        self._asked = check.signers
        ordered = tuple(sorted(self._aggregated))
        kind = MessageKind.UNMASK_REQUEST
        proof = signatures[:quorum]
        out = {u: UnmaskRequest(self._header(kind, u), ordered, proof) for u in sorted(self._asked)}
        self._timed("finish_consistency", start)
        return out

    def _receive_signature(self: _Server, message: ConsistencyResponse) -> None:
        """Verify and keep a client's signature (called by ``receive``)."""
        if self._consistency is None:
            raise OutOfOrderError("consistency response while no consistency check is running")
        start = time.perf_counter()
        self._consistency.add(message)
        self._timed("receive_consistency", start)
