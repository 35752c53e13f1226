"""The survivor-list consistency check against an active server (Bonawitz et al., CCS 2017).

Each client reveals, for every neighbour ``v`` whose shares it holds, the share of ``b_v`` if
``v`` is in the aggregated set ``S`` of its unmask request and the share of ``s_sk_v``
otherwise. A server that shows different clients different sets (selective delivery) collects
both secrets of some users and strips every mask off their inputs. The check makes the set
common knowledge before anything is revealed:

1. ``SecAggServer.finish_inputs`` fixes ``S``; with the check its unmask requests are not sent.
2. ``SecAggServer.start_consistency(roster)``: a :class:`ConsistencyRequest` naming ``S`` to
   each user of U3.
3. ``SecAggClient.sign_survivors``: the client checks ``S`` as it would before unmasking, and
   that it holds the shares of every neighbour in ``S``, then signs
   :func:`~fedprivacy.secagg.derivation.survivors_statement` (session, round, parameters,
   ``S``) with its node key. **It signs one set per round**: a second request is refused.
4. ``SecAggServer.receive`` verifies each signature under the roster;
   ``SecAggServer.finish_consistency`` sends an unmask request carrying the signatures of the
   members of ``S`` to every user that signed (and aborts below the quorum).
5. ``SecAggClient.unmask`` reveals its shares only if the request names the set it signed and
   carries valid signatures of that set by at least :func:`consistency_quorum` distinct
   members of ``S``, checked with the client's own roster (from its machine, never from the
   server). Any invalid, duplicate or non-member signature refuses the request.

**Why a strict majority.** The quorum is ``max(t, floor(n / 2) + 1)`` for ``n`` participants:
every honest client signs once, so two different sets cannot both gather a majority of the
participants. Every honest client that unmasks has therefore seen the same ``S``, and the
server learns what it learns from one honest request: the sum over ``S`` (the connectivity
check on ``G[S]`` still applies). With SecAgg's default threshold (a strict majority of all
parties) the quorum is ``t``. A quorum of ``t`` alone would not do with a smaller explicit
threshold: with ``n = 10`` and ``t = 5`` two disjoint halves can each sign their own set.
Signatures count only from members of ``S`` (the signed set, as in Bonawitz et al.), so a round
whose ``S`` is smaller than the quorum cannot pass the check and aborts: on SecAgg+ with many
dropouts, or with a batch policy that keeps a minority of the participants.

The check needs each party's signing key and the federation's :class:`~fedprivacy.crypto.
signing.Roster`: the SuperNode authentication keys (:mod:`fedprivacy.crypto.signing`).

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> from fedprivacy.secagg.params import SecAggParameters
>>> params = SecAggParameters.create(bytes(16), 0, range(10), 3, FixedPointCodec.for_sum(1, 10, 32))
>>> params.threshold, consistency_quorum(params)
(6, 6)
>>> import dataclasses
>>> consistency_quorum(dataclasses.replace(params, threshold=5))
6
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from fedprivacy.crypto.signing import Roster, SigningKey, Statement
from fedprivacy.errors import AuthenticationError, ParameterError
from fedprivacy.secagg.derivation import survivors_statement
from fedprivacy.secagg.errors import (
    ConsistencyError,
    MalformedMessageError,
    ProtocolViolationError,
    RoundAbortedError,
    UnknownSenderError,
)
from fedprivacy.secagg.graph import describe
from fedprivacy.secagg.messages import ConsistencyRequest, Message
from fedprivacy.secagg.params import SecAggParameters

__all__ = [
    "ConsistencyCheck",
    "check_aggregated",
    "check_restorable",
    "check_signable",
    "checks_for",
    "consistency_quorum",
    "refuse_second_set",
    "roster_of",
    "verify_signature",
    "verify_signatures",
    "verify_unmask",
]

Signatures = tuple[tuple[int, bytes], ...]


def consistency_quorum(params: SecAggParameters) -> int:
    """Valid signatures of ``S`` by distinct members of ``S`` a client needs before unmasking.

    Returns
    -------
    int
        ``max(threshold, floor(n / 2) + 1)``: a strict majority of the ``n`` participants, so
        that no two sets reach it (see the module docstring), and never fewer than ``t``.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 100, 32)
    >>> plus = SecAggParameters.create(bytes(16), 0, range(100), 3, codec, degree=14)
    >>> plus.threshold, consistency_quorum(plus)
    (8, 51)
    """
    return max(params.threshold, len(params.participants) // 2 + 1)


@dataclass(frozen=True)
class ConsistencyCheck:
    """A client's material for the check: its node's signing key and the federation's roster.

    Both are read on the client's own machine (:meth:`SigningKey.from_file
    <fedprivacy.crypto.signing.SigningKey.from_file>`, :meth:`Roster.from_file
    <fedprivacy.crypto.signing.Roster.from_file>`); the roster is never taken from the server.

    Attributes
    ----------
    signing_key : SigningKey
        The key this client signs with (the SuperNode authentication key).
    roster : Roster
        Every participant's public key; the client verifies the other signatures with it.
    """

    signing_key: SigningKey
    roster: Roster

    def check_user(self, user: int) -> None:
        """Refuse material whose roster does not list ``user`` with this signing key.

        Raises
        ------
        ParameterError
            If the roster has no key for ``user`` or another key than :attr:`signing_key`'s.

        Examples
        --------
        >>> key = SigningKey.generate()
        >>> check = ConsistencyCheck(key, Roster({4: key.public_openssh()}))
        >>> check.check_user(4)
        >>> check.check_user(5)
        Traceback (most recent call last):
        ...
        fedprivacy.errors.ParameterError: consistency: the roster has no key of user 5
        """
        if user not in self.roster:
            raise ParameterError("consistency", f"the roster has no key of user {user}")
        mine = self.signing_key.public_openssh().split()[:2]
        if self.roster.keys[user].strip().split()[:2] != mine:
            raise ParameterError(
                "consistency", f"the roster's key of user {user} is not this signing key"
            )

    def sign(
        self, params: SecAggParameters, aggregated: Iterable[int], model: bytes = b""
    ) -> bytes:
        """The signature on "round ``params`` aggregates ``aggregated``, trained on ``model``"."""
        statement = survivors_statement(params, aggregated, model)
        return self.signing_key.sign(Statement.SURVIVORS, statement)


def check_aggregated(params: SecAggParameters, users: tuple[int, ...]) -> set[int]:
    """The aggregated set a client is asked to sign or unmask, refused unless it is acceptable.

    Every client applies these checks before it signs (with the consistency check) and again
    before it unmasks: no repeated user, participants only, at least ``t`` users and a connected
    ``G[S]`` (otherwise each component's sum could be unmasked).

    Raises
    ------
    MalformedMessageError, UnknownSenderError, RoundAbortedError, ProtocolViolationError
        For a repeated user, a non-participant, fewer than ``t`` users, a disconnected set.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1, 4, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(4), 3, codec)
    >>> sorted(check_aggregated(params, (2, 0, 1)))
    [0, 1, 2]
    >>> check_aggregated(params, (0, 1))
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.RoundAbortedError: only 2 inputs to aggregate; the threshold is 3
    """
    p = params
    aggregated = set(users)
    if len(aggregated) != len(users):
        raise MalformedMessageError("the aggregated set lists a user twice")
    if not aggregated <= set(p.participants):
        raise UnknownSenderError("the aggregated set lists non-participants")
    if len(aggregated) < p.threshold:
        raise RoundAbortedError(
            f"only {len(aggregated)} inputs to aggregate; the threshold is {p.threshold}"
        )
    parts = p.components(aggregated)
    if len(parts) > 1:
        raise ProtocolViolationError(
            f"the aggregated set forms {describe(parts)} in the neighbour graph; revealing "
            "the shares would let the server unmask each component's sum"
        )
    return aggregated


def check_signable(
    params: SecAggParameters, user: int, held: Collection[int], aggregated: Collection[int]
) -> None:
    """Refuse to sign a set naming a neighbour whose shares this client never received.

    An honest server relays to every client of U3 the shares of all its neighbours in U2, and
    ``S`` lies in U3, a subset of U2 (Bonawitz et al.'s check ``U3 ⊆ U2``). A neighbour in ``S``
    without a share here means the server told this client that the neighbour had not shared
    (so the client did not mask with it) while aggregating the neighbour's input.

    Raises
    ------
    ConsistencyError
        Naming the first such neighbour.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1, 4, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(4), 3, codec)
    >>> check_signable(params, 0, held={1, 2, 3}, aggregated={0, 1, 2})
    >>> check_signable(params, 0, held={1, 2}, aggregated={0, 1, 3})
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.ConsistencyError: the aggregated set names user 3, whose shares \
were never delivered to user 0
    """
    missing = sorted((set(aggregated) & params.neighbours[user]) - set(held))
    if missing:
        raise ConsistencyError(
            f"the aggregated set names user {missing[0]}, whose shares were never delivered to "
            f"user {user}"
        )


def refuse_second_set(signed: tuple[int, ...] | None, message: Message) -> None:
    """Raise :class:`ConsistencyError` if ``message`` asks to sign a set other than ``signed``.

    Called when a client that has already signed gets a consistency request again: the same set
    is an ordinary replay (the caller raises :class:`DuplicateMessageError`), another set is the
    server trying to collect signatures on two sets.

    Examples
    --------
    >>> from fedprivacy.secagg.messages import Header, MessageKind
    >>> header = Header(MessageKind.CONSISTENCY_REQUEST, bytes(16), 0, 0xFFFFFFFF, 1)
    >>> refuse_second_set((1, 2, 3), ConsistencyRequest(header, (3, 2, 1)))
    >>> refuse_second_set((1, 2, 3), ConsistencyRequest(header, (1, 2)))
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.ConsistencyError: this client already signed the aggregated set \
[1, 2, 3] in this round; it signs one set per round
    """
    if (
        signed is not None
        and isinstance(message, ConsistencyRequest)
        and tuple(sorted(set(message.aggregated))) != signed
    ):
        raise ConsistencyError(
            f"this client already signed the aggregated set {list(signed)} in this round; it "
            "signs one set per round"
        )


def verify_signature(roster: Roster, signer: int, statement: bytes, signature: bytes) -> None:
    """Check one signature on ``statement``; :class:`ConsistencyError` if it does not verify."""
    try:
        roster.verify(signer, Statement.SURVIVORS, statement, signature)
    except AuthenticationError as exc:
        raise ConsistencyError(f"the signature of user {signer} is invalid: {exc}") from exc


def verify_signatures(
    params: SecAggParameters,
    roster: Roster,
    aggregated: Collection[int],
    signatures: Signatures,
    model: bytes = b"",
) -> None:
    """Check that at least the quorum of distinct members of ``aggregated`` signed exactly it.

    Parameters
    ----------
    params : SecAggParameters
        The round (the statement binds its session, index and parameters).
    roster : Roster
        The verifier's own copy of the participants' public keys.
    aggregated : collection of int
        The set the verifier signed and is asked to unmask.
    signatures : tuple of (int, bytes)
        ``(signer, signature)`` pairs from the unmask request.
    model : bytes
        The digest of the model the verifier trained on: a signer sent another model signed
        another statement, and its signature does not verify.

    Raises
    ------
    ConsistencyError
        If a signer appears twice, is not a member of ``aggregated``, is not in the roster or
        its signature does not verify on this round's statement for ``aggregated`` (every
        signature must verify: a server that forwards a bad one deviates), or if fewer than
        :func:`consistency_quorum` signatures remain.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 4, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(4), 2, codec)
    >>> checks = checks_for({u: SigningKey.generate() for u in range(4)})
    >>> chosen = [0, 1, 2]
    >>> sigs = tuple((u, checks[u].sign(params, chosen)) for u in chosen)
    >>> verify_signatures(params, checks[3].roster, chosen, sigs)
    >>> verify_signatures(params, checks[3].roster, chosen, sigs[:2])
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.ConsistencyError: only 2 members of the aggregated set signed it; \
unmasking needs 3 (a strict majority of the 4 participants and at least the threshold 3)
    >>> foreign = ((3, checks[3].sign(params, chosen)),)
    >>> verify_signatures(params, checks[3].roster, chosen, sigs + foreign)
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.ConsistencyError: a signature of user 3, not a member of the set
    """
    members = set(aggregated)
    statement = survivors_statement(params, members, model)
    seen: set[int] = set()
    for signer, signature in signatures:
        if signer in seen:
            raise ConsistencyError(f"user {signer} signed twice")
        if signer not in members:
            raise ConsistencyError(f"a signature of user {signer}, not a member of the set")
        verify_signature(roster, signer, statement, signature)
        seen.add(signer)
    quorum = consistency_quorum(params)
    if len(seen) < quorum:
        raise ConsistencyError(
            f"only {len(seen)} members of the aggregated set signed it; unmasking needs "
            f"{quorum} (a strict majority of the {len(params.participants)} participants and "
            f"at least the threshold {params.threshold})"
        )


def verify_unmask(
    params: SecAggParameters,
    roster: Roster,
    signed: tuple[int, ...] | None,
    aggregated: Collection[int],
    signatures: Signatures,
    model: bytes = b"",
) -> None:
    """A client's check of an unmask request: the set it signed, signed by enough members.

    Raises
    ------
    ConsistencyError
        If ``aggregated`` is not ``signed`` (or nothing was signed), or as
        :func:`verify_signatures`.
    """
    if signed is None or tuple(sorted(aggregated)) != signed:
        raise ConsistencyError(
            f"asked to unmask {sorted(aggregated)}, not the set "
            + (f"{list(signed)} this client signed" if signed else "signed by this client")
        )
    verify_signatures(params, roster, aggregated, signatures, model)


def check_restorable(written_with: bool, consistency: ConsistencyCheck | None) -> None:
    """Refuse to restore a client's state with or without the check, unlike how it was written.

    A node that loses its signing material between two stages must not go on without the
    check (a server could then skip it), nor start it mid-round.

    Raises
    ------
    ConsistencyError
        If ``written_with`` differs from ``consistency is not None``.

    Examples
    --------
    >>> check_restorable(False, None)
    >>> check_restorable(True, None)
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.ConsistencyError: the state was written with the consistency \
check; restore it with the node's signing key and roster
    """
    if written_with != (consistency is not None):
        raise ConsistencyError(
            "the state was written "
            + ("with the consistency check; restore it with" if written_with else "without the")
            + (" the node's signing key and roster" if written_with else " consistency check")
        )


def roster_of(keys: Mapping[int, SigningKey]) -> Roster:
    """The roster of ``keys``' public keys (for simulations: a deployment reads its file).

    Examples
    --------
    >>> roster = roster_of({u: SigningKey.generate() for u in (3, 5)})
    >>> 3 in roster, 4 in roster
    (True, False)
    """
    return Roster({int(u): key.public_openssh() for u, key in keys.items()})


def checks_for(keys: Mapping[int, SigningKey]) -> dict[int, ConsistencyCheck]:
    """Each user's :class:`ConsistencyCheck`, all with the roster of ``keys`` (simulations).

    Examples
    --------
    >>> checks = checks_for({u: SigningKey.generate() for u in range(3)})
    >>> sorted(checks), checks[0].roster is checks[2].roster
    ([0, 1, 2], True)
    """
    roster = roster_of(keys)
    return {int(u): ConsistencyCheck(key, roster) for u, key in keys.items()}
