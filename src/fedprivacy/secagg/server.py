"""The server's state machine: collects each stage, relays, and removes the masks."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

from fedprivacy.crypto.shamir import Share
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.consistency_server import ServerConsistency
from fedprivacy.secagg.errors import (
    DisconnectedSetError,
    DuplicateMessageError,
    OutOfOrderError,
    ProtocolViolationError,
    RoundAbortedError,
    UnknownSenderError,
)
from fedprivacy.secagg.graph import describe
from fedprivacy.secagg.messages import (
    SERVER,
    AdvertiseKeys,
    ConsistencyResponse,
    KeyRoster,
    MaskedInput,
    Message,
    MessageKind,
    ServerStage,
    ShareDelivery,
    ShareKeys,
    ShareKind,
    UnmaskRequest,
    UnmaskResponse,
    check_vector,
)
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.party import RoundParty
from fedprivacy.secagg.reveals import RevealedShares, check_response, reveal_kind
from fedprivacy.secagg.round_keys import RegisteredKeys, RoundKeys
from fedprivacy.secagg.server_unmask import ServerUnmasking
from fedprivacy.secagg.server_view import ReceivedState, ServerView, server_view

AggregationPolicy = Callable[[frozenset[int]], frozenset[int]]
"""Maps the users whose masked inputs arrived to the subset the server may aggregate."""


_STAGE_OF = {
    MessageKind.ADVERTISE_KEYS: ServerStage.KEYS,
    MessageKind.SHARE_KEYS: ServerStage.SHARES,
    MessageKind.MASKED_INPUT: ServerStage.INPUTS,
    MessageKind.UNMASK_RESPONSE: ServerStage.UNMASK,
}


class SecAggServer(ServerUnmasking, ServerConsistency, RoundParty):
    """The server's side of a round, for an honest-but-curious server.

    Feed every client message to :meth:`receive`; close each stage with the matching
    ``finish_*`` method (a real deployment calls it when all expected messages arrived or a
    timeout expired), which returns the messages to send on. Users who send nothing in a stage
    are dropouts from then on. When fewer than ``threshold`` users remain, the stage raises
    :class:`RoundAbortedError` and the server is left in the ``ABORTED`` stage with no aggregate.

    The server only ever unmasks the sum over the aggregated set ``S``: :meth:`finish_inputs`
    refuses (:class:`DisconnectedSetError`) a set whose neighbour graph ``G[S]`` is disconnected,
    since each component's sum would be revealed separately; the clients refuse it as well.
    :meth:`view` computes what the server can unmask from what it received.

    Parameters
    ----------
    params : SecAggParameters
        The public parameters of the round.
    registered : mapping of int to RegisteredKeys, optional
        The public keys and signatures ``(c_pk, s_pk, signature)`` of users that reuse keys
        advertised in an earlier round (:mod:`fedprivacy.secagg.key_epoch`,
        :meth:`reused_keys`): they are in U1 without advertising; each must commit to its seed
        with its shares. A user among them that advertises anyway replaces its keys.

    Attributes
    ----------
    model : bytes
        The digest of the model the server sent for this round (empty: none), set before the
        unmasking: the aggregated users' pairwise masks and signatures are bound to it
        (:func:`~fedprivacy.secagg.derivation.pairwise_mask_key`).

    """

    def __init__(
        self,
        params: SecAggParameters,
        *,
        registered: Mapping[int, RegisteredKeys] | None = None,
    ) -> None:
        super().__init__(params, SERVER, "the server")
        self.stage = ServerStage.KEYS
        self._keys = RoundKeys(
            {u: keys for u, keys in (registered or {}).items() if u in params.participants}
        )
        self._shares: dict[int, ShareKeys] = {}
        self._inputs: dict[int, np.ndarray] = {}
        self._input_senders: set[int] = set()  # U3, kept after the vectors are discarded
        # responder -> owner -> the kind and the parsed share
        self._responses: dict[int, dict[int, tuple[ShareKind, Share]]] = {}
        self._excess: dict[int, np.ndarray] = {}  # exact noise mode: what each survivor removes
        self._aggregated: frozenset[int] = frozenset()
        self._asked: frozenset[int] = frozenset()
        self.model = b""

    # ------------------------------------------------------------------ helpers
    @property
    def advertised(self) -> frozenset[int]:
        """U1: users whose keys arrived, or were registered in an earlier round."""
        return self._keys.present

    def reused_keys(self) -> dict[int, RegisteredKeys]:
        """The public keys of the users that reuse them, for the next round's ``registered``."""
        return self._keys.reused()

    @property
    def shared(self) -> frozenset[int]:
        """U2: users whose encrypted shares arrived."""
        return frozenset(self._shares)

    @property
    def submitted(self) -> frozenset[int]:
        """U3: users whose masked inputs arrived."""
        return frozenset(self._inputs)

    def _abort(
        self, reason: str, error: type[RoundAbortedError] = RoundAbortedError
    ) -> RoundAbortedError:
        self.stage = ServerStage.ABORTED
        self._inputs = {}
        return error(f"round {self.params.round_index} aborted: {reason}")

    def _need(self, count: int, what: str) -> None:
        if count < self.params.threshold:
            raise self._abort(f"only {count} {what}; the threshold is {self.params.threshold}")

    # ------------------------------------------------------------------ receiving
    def receive(self, message: Message | bytes) -> None:
        """Validate a client message and store it for the current stage.

        Parameters
        ----------
        message : Message or bytes
            A client's message.

        Raises
        ------
        SecAggError
            ``WrongRoundError``, ``UnknownSenderError``, ``DuplicateMessageError``,
            ``OutOfOrderError``, ``MalformedMessageError`` or ``ProtocolViolationError``; the
            message is then ignored and the state is unchanged.

        """
        start = time.perf_counter()
        msg = self._decode(message)
        h = msg.header
        p = self.params
        if h.recipient != SERVER:
            raise UnknownSenderError(f"message addressed to {h.recipient}, not to the server")
        if h.sender not in p.participants:
            raise UnknownSenderError(f"{h.sender} is not a participant of this round")
        if isinstance(msg, ConsistencyResponse):  # the optional consistency check
            return self._receive_signature(msg)
        stage = _STAGE_OF.get(h.kind)
        if stage is None:
            raise OutOfOrderError(f"{h.kind.name} is a server message")
        store = (self._keys.advertised, self._shares, self._inputs, self._responses)[stage]
        if h.sender in store:
            raise DuplicateMessageError(f"{h.kind.name} from {h.sender} was already received")
        if stage != self.stage:
            raise OutOfOrderError(
                f"{h.kind.name} from {h.sender} while the server is in stage {self.stage.name}"
            )
        if isinstance(msg, AdvertiseKeys):
            self._keys.advertise(msg)
        elif isinstance(msg, ShareKeys):
            self._check_share_keys(msg)
            self._shares[h.sender] = msg
        elif isinstance(msg, MaskedInput):
            self._inputs[h.sender] = self._check_masked_input(msg)
            self._input_senders.add(h.sender)
        elif isinstance(msg, UnmaskResponse):
            excess = self._check_excess(msg)
            self._responses[h.sender] = self._check_unmask_response(msg)
            if excess is not None:
                self._excess[h.sender] = excess
        self._timed(f"receive_{stage.name.lower()}", start)

    def _check_share_keys(self, msg: ShareKeys) -> None:
        sender = msg.header.sender
        if sender not in self.advertised:
            raise UnknownSenderError(f"{sender} sent shares without having advertised keys")
        receivers = [v for v, _ in msg.ciphertexts]
        expected = self.params.neighbours[sender] & self.advertised
        if len(set(receivers)) != len(receivers) or set(receivers) != expected:
            raise ProtocolViolationError(
                f"{sender} must send exactly one share to each advertised neighbour"
            )
        self._keys.commit(sender, msg.seed_commitment)

    def _check_masked_input(self, msg: MaskedInput) -> np.ndarray:
        sender = msg.header.sender
        if sender not in self._shares:
            raise UnknownSenderError(f"{sender} sent an input without having shared its keys")
        return check_vector(self.params, msg.vector, f"masked input of {sender}")

    def _check_excess(self, msg: UnmaskResponse) -> np.ndarray | None:
        """The excess noise an unmask response carries, checked (exact noise mode)."""
        sender, excess = msg.header.sender, msg.excess
        if excess is not None and sender not in self._aggregated:
            raise ProtocolViolationError(f"{sender} is not aggregated: it has no excess to remove")
        return None if excess is None else check_vector(self.params, excess, f"excess of {sender}")

    def _check_unmask_response(self, msg: UnmaskResponse) -> RevealedShares:
        sender = msg.header.sender
        if sender not in self._asked:
            raise UnknownSenderError(f"{sender} was not asked to unmask")
        expected = {}
        for v in self.params.neighbours[sender] & self._shares.keys():
            kind = reveal_kind(v, sender, self._aggregated, self._keys.reusing)
            if kind is not None:
                expected[v] = kind
        shares, pair_keys = check_response(self.params, msg, expected)
        for v, key in pair_keys.items():
            self._keys.pair_keys[sender, v] = key
        return shares

    # ------------------------------------------------------------------ closing stages
    def finish_keys(self) -> dict[int, KeyRoster]:
        """Close stage 0 and build each advertiser's roster of its neighbours' public keys.

        Returns
        -------
        dict of int to KeyRoster
            The message for each user in U1.

        """
        self._expect(ServerStage.KEYS)
        start = time.perf_counter()
        present = self.advertised
        self._need(len(present), "users advertised keys")
        rosters = {}
        for u in sorted(present):
            visible = sorted((self.params.neighbours[u] | {u}) & present)
            entries = tuple((v, *self._keys.signed(v)) for v in visible)
            rosters[u] = KeyRoster(self._header(MessageKind.KEY_ROSTER, u), entries)
        self.stage = ServerStage.SHARES
        self._timed("finish_keys", start)
        return rosters

    def finish_shares(self) -> dict[int, ShareDelivery]:
        """Close stage 1 and route the ciphertexts of U2 to their receivers in U2.

        Returns
        -------
        dict of int to ShareDelivery
            The message for each user in U2.

        """
        self._expect(ServerStage.SHARES)
        start = time.perf_counter()
        self._need(len(self._shares), "users shared their keys")
        inbox: dict[int, list[tuple[int, bytes]]] = {u: [] for u in self._shares}
        for sender in sorted(self._shares):
            for receiver, ct in self._shares[sender].ciphertexts:
                if receiver in inbox:
                    inbox[receiver].append((sender, ct))
        self.stage = ServerStage.INPUTS
        self._timed("finish_shares", start)
        return {
            u: ShareDelivery(self._header(MessageKind.SHARE_DELIVERY, u), tuple(cts))
            for u, cts in inbox.items()
        }

    def finish_inputs(self, policy: AggregationPolicy | None = None) -> dict[int, UnmaskRequest]:
        """Close stage 2, fix the aggregated set and ask U3 for the shares that unmask it.

        Parameters
        ----------
        policy : callable, optional
            Chooses the aggregated subset of U3 (for example whole batches only). Users left out
            are treated exactly like dropouts: their self-mask seeds are never reconstructed, so
            their inputs stay hidden. By default all of U3 is aggregated.

        Returns
        -------
        dict of int to UnmaskRequest
            The message for each user in U3.

        Raises
        ------
        DisconnectedSetError
            If the neighbour graph restricted to the chosen set is disconnected: the pairwise
            masks would cancel within each component, revealing each component's sum.
        RoundAbortedError
            If fewer than ``threshold`` inputs are chosen, or some secret the unmasking needs
            has fewer than ``threshold`` holders left.

        """
        self._expect(ServerStage.INPUTS)
        start = time.perf_counter()
        submitted = frozenset(self._inputs)
        chosen = submitted if policy is None else frozenset(policy(submitted))
        if not chosen <= submitted:
            raise ParameterError("policy", "returned users whose inputs did not arrive")
        self._need(len(chosen), "inputs to aggregate")
        p = self.params
        parts = p.components(chosen)
        if len(parts) > 1:
            raise self._abort(
                f"the aggregated users form {describe(parts)} in the neighbour graph; each "
                "component's sum would be revealed",
                DisconnectedSetError,
            )
        # Every secret the unmasking needs must have t potential holders among U3, or the round
        # cannot finish: abort now instead of after the clients' work. Users of U3 left out by the
        # policy count as holders: they hold the shares legitimately and answer the request (with
        # the shares of b_v for v in S and of s_sk_v for v outside S, never both for one owner),
        # and G[S] being connected is what keeps the unmasked span to the sum over S.
        for v in sorted(self._shares):  # a left-out user reusing its keys has no secret to rebuild
            if v in chosen or (v not in self._keys.reusing and p.neighbours[v] & chosen):
                holders = len(p.neighbours[v] & submitted)
                if holders < p.threshold:
                    raise self._abort(
                        f"only {holders} holders of the shares of user {v} remain; the "
                        f"threshold is {p.threshold}"
                    )
        self._aggregated = chosen
        self._asked = submitted
        ordered = tuple(sorted(chosen))
        self.stage = ServerStage.UNMASK
        self._timed("finish_inputs", start)
        return {
            u: UnmaskRequest(self._header(MessageKind.UNMASK_REQUEST, u), ordered)
            for u in sorted(submitted)
        }

    # ------------------------------------------------------------------ the server's view
    def received_state(self) -> ReceivedState:
        """What this server received in the round so far, as input to :func:`server_view`.

        Returns
        -------
        ReceivedState
            U3, U2, the neighbour graph and the owners of the secrets for which at least
            ``threshold`` shares arrived (whether or not the round then completed).

        """
        revealed = [
            (owner, kind)
            for shares in self._responses.values()
            for owner, (kind, _) in shares.items()
        ]
        return ReceivedState.from_revealed(
            frozenset(self._input_senders),
            self.shared,
            self.params.neighbours,
            revealed,
            self.params.threshold,
            pair_keys=self._keys.pair_keys.keys(),
        )

    def view(self) -> ServerView:
        """Every sum of inputs this server can compute from what it received.

        Returns
        -------
        ServerView
            :func:`server_view` of :meth:`received_state`. With honest clients: the sum over
            the aggregated set after a completed round, nothing after an aborted one.

        """
        return server_view(self.received_state())

    @property
    def excess(self) -> dict[int, np.ndarray]:
        """The excess noise vectors received (exact noise mode), by sender: part of the view."""
        return dict(self._excess)

    def _expect(self, stage: ServerStage) -> None:
        if self.stage is not stage:
            raise OutOfOrderError(f"cannot close stage {stage.name} in stage {self.stage.name}")
