"""What the server and the silos of Protocol 1 share: headers and the session check.

Both parties stamp the messages they send with the session, the round (0 during setup), the
kind's phase and their own id, accept a message typed or as bytes, and refuse one of another
session before looking at anything else (:class:`Party`).
"""

from __future__ import annotations

from fedprivacy.secagg.private_weighting.errors import WrongSessionError
from fedprivacy.secagg.private_weighting.messages import (
    Header,
    Message,
    MessageKind,
    decode_message,
    make_header,
)
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters

__all__ = ["Party"]


class Party:
    """The state and checks common to the server and the silos.

    Parameters
    ----------
    params : PrivateWeightingParameters
        The session's public parameters.
    party : int
        This party's id in the headers it sends (a silo, or ``SERVER``).

    Attributes
    ----------
    params : PrivateWeightingParameters
        The session's public parameters.
    """

    def __init__(self, params: PrivateWeightingParameters, party: int) -> None:
        self.params = params
        self._party = party

    def _header(self, kind: MessageKind, recipient: int, round_index: int = 0) -> Header:
        return make_header(kind, self.params.session_id, round_index, self._party, recipient)

    def _decode(self, message: Message | bytes) -> Message:
        """Parse ``message`` if it is bytes; refuse it if it belongs to another session."""
        msg = decode_message(message) if isinstance(message, bytes | bytearray) else message
        if msg.header.session_id != self.params.session_id:
            raise WrongSessionError("message from another session")
        return msg
