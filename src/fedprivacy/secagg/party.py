"""What the client and the server of a round share: headers, the round check, timings, mask signs.

Both state machines stamp the messages they send with the round's session and index and their
own id, accept a message typed or as bytes, refuse one bound to another session or round before
looking at anything else, and time their stages (:class:`RoundParty`). Both apply the pairwise
masks with one sign convention (:func:`pairwise_sign`).
"""

from __future__ import annotations

import time

from fedprivacy.secagg.errors import WrongRoundError
from fedprivacy.secagg.messages import Header, Message, MessageKind, decode_message
from fedprivacy.secagg.params import SecAggParameters

__all__ = ["RoundParty", "pairwise_sign"]


def pairwise_sign(user: int, peer: int) -> int:
    """The sign with which ``user`` applies the mask it shares with ``peer``: 1 for the lower id.

    The two applications cancel in the sum; the server removes the mask of a dropped ``peer``
    from ``user``'s input with the opposite sign.

    Examples
    --------
    >>> pairwise_sign(3, 7), pairwise_sign(7, 3)
    (1, -1)
    """
    return 1 if user < peer else -1


class RoundParty:
    """The state and checks common to a round's client and server.

    Parameters
    ----------
    params : SecAggParameters
        The public parameters of the round.
    party : int
        This party's id in the headers it sends (a user, or ``SERVER``).
    name : str
        How errors name this party (``"this client"``, ``"the server"``).

    Attributes
    ----------
    params : SecAggParameters
        The public parameters of the round.
    seconds : dict of str to float
        The time spent in each stage so far.
    """

    def __init__(self, params: SecAggParameters, party: int, name: str) -> None:
        self.params = params
        self.seconds: dict[str, float] = {}
        self._party = party
        self._name = name

    def _timed(self, name: str, start: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def _header(self, kind: MessageKind, recipient: int) -> Header:
        p = self.params
        return Header(kind, p.session_id, p.round_index, self._party, recipient)

    def _decode(self, message: Message | bytes) -> Message:
        """Parse ``message`` if it is bytes; refuse it if it belongs to another session or round."""
        msg = decode_message(message) if isinstance(message, bytes | bytearray) else message
        h = msg.header
        p = self.params
        if h.session_id != p.session_id or h.round_index != p.round_index:
            raise WrongRoundError(
                f"message for round {h.round_index} of another session or round; {self._name} is "
                f"in round {p.round_index}"
            )
        return msg
