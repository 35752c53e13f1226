"""The nodes' joint draw: the SecAgg+ graph's seed and the batch layout, over three stages.

The server proposes every round's parameters, the SecAgg+ graph's seed among them; chosen by
the server, the graph is the server's (issue #50, finding 2: it grinds the seed until its
colluders are a victim's only neighbours), and so are the batches of Multi-RoundSecAgg if it
lays the users out (it puts a victim's batch mates among its colluders and reads the victim in a
"batch sum"). So before a session's first round with batches, or on a sparse graph, the server
runs :func:`draw_joint` (the nodes' commit-then-reveal, :mod:`fedprivacy.secagg.joint_seed`)
and every node refuses a round whose ``graph_seed`` or batch ``positions`` are not those of its
draw (:func:`check_graph_seed`, :func:`check_batch_layout`: a
:class:`~fedprivacy.errors.PolicyViolationError` naming ``graph_seed`` or ``batch_layout``):

===========  ==================================================  ==========================
stage        request (server -> node)                            reply (node -> server)
===========  ==================================================  ==========================
``commit``   ``session``                                         ``commitment``
``reveal``   ``session``, ``commitments`` (every node's)         ``secret``
``draw``     ``session``, ``secrets`` (every node's)             ``drawn``
===========  ==================================================  ==========================

A node keeps its draw in its ``joint`` state entry (which outlives the round; :mod:`fedprivacy.
flower.party_state`): the session, the phase (committed, revealed, drawn), its secret and the
digest of the list it revealed against; once drawn, the seed and the users who drew. A
``commit`` starts a fresh draw (a new secret); a second list at ``reveal`` is refused. The
layout orders the users who drew by a hash of the seed (:meth:`~fedprivacy.participation.layout.
BatchLayout.drawn`), a uniform order whatever the server and its colluders committed to.

Adversary: a server that chooses the graph or the batches (grinding the seed, forging a node's
commitment or secret, or sending positions of its own). Not covered: a server that restarts
draws until it likes the graph (each draw is a fresh uniform graph; the node's degree floor,
:mod:`fedprivacy.secagg.degree_bound`, keeps each one's chance of handing colluders a threshold
of a user's neighbours below 2^-40); a new session (a new ``flwr run``) draws a new layout.

Examples
--------
>>> from fedprivacy.flower.messaging.exchange import StageExchange
>>> from fedprivacy.flower.nodes.node import Node
>>> from fedprivacy.flower.messaging.transport import InProcessTransport
>>> exchange = StageExchange(InProcessTransport({u: Node(u) for u in range(4)}))
>>> drawn = draw_joint(exchange, 0, bytes(16), range(4))
>>> len(drawn.graph_seed), sorted(drawn.layout.order), [e["stage"] for e in exchange.events]
(32, [0, 1, 2, 3], ['commit', 'reveal', 'draw'])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fedprivacy.errors import PolicyViolationError
from fedprivacy.flower.messaging.stages import Record, Stage, field
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.errors import MalformedMessageError, OutOfOrderError, ProtocolViolationError
from fedprivacy.secagg.joint_seed import (
    SECRET_BYTES,
    check_secrets,
    commitment,
    commitments_digest,
    decode_entries,
    encode_entries,
    graph_seed,
    joint_seed,
)
from fedprivacy.secagg.params import MIN_PARTICIPANTS, SESSION_ID_BYTES, SecAggParameters

__all__ = [
    "JOINT",
    "JointDraw",
    "check_batch_layout",
    "check_graph_seed",
    "draw_joint",
    "drawn_layout",
    "on_commit",
    "on_draw",
    "on_reveal",
]

JOINT = "joint"
"""The node's state entry of its draw: session, phase byte, then the phase's bytes."""
_COMMITTED, _REVEALED, _DRAWN = b"c", b"r", b"s"
_USER_BYTES = 8  # each user who drew, after the seed and digest of a finished draw

#: One stage with the nodes: ``(stage, round, requests) -> replies`` (a
#: :class:`~fedprivacy.flower.messaging.exchange.StageExchange`).
Exchange = Callable[[Stage, int, Mapping[int, Record]], Mapping[int, Record]]


def _session(request: Record) -> bytes:
    session: bytes = field(request, "session", bytes)
    if len(session) != SESSION_ID_BYTES:
        raise MalformedMessageError(f"a session id has {SESSION_ID_BYTES} bytes")
    return session


def _entry(state: Mapping[str, bytes], session: bytes) -> tuple[bytes, bytes]:
    """The phase and the bytes of the node's draw in ``session`` (``b""`` phase: none)."""
    data = state.get(JOINT, b"")
    if data[:SESSION_ID_BYTES] != session:
        return b"", b""
    return data[SESSION_ID_BYTES : SESSION_ID_BYTES + 1], data[SESSION_ID_BYTES + 1 :]


def on_commit(node: Any, request: Record, state: dict[str, bytes]) -> Record:
    """``commit``: a fresh secret from the OS; its commitment."""
    session = _session(request)
    secret = os.urandom(SECRET_BYTES)
    state[JOINT] = session + _COMMITTED + secret
    return {"commitment": commitment(session, node.party, secret)}


def on_reveal(node: Any, request: Record, state: dict[str, bytes]) -> Record:
    """``reveal``: the secret, once the list holds this node's commitment; one list a draw."""
    session = _session(request)
    phase, data = _entry(state, session)
    if phase not in (_COMMITTED, _REVEALED):
        raise OutOfOrderError("this node has no open commitment in this session")
    secret = data[:SECRET_BYTES]
    listed = decode_entries(request.get("commitments"))
    if listed.get(node.party) != commitment(session, node.party, secret):
        raise ProtocolViolationError("the list of commitments leaves out this node's own")
    digest = commitments_digest(session, listed)
    if phase == _REVEALED and data[SECRET_BYTES:] != digest:
        raise ProtocolViolationError("a second list of commitments: this node revealed already")
    state[JOINT] = session + _REVEALED + secret + digest
    return {"secret": secret}


def on_draw(node: Any, request: Record, state: dict[str, bytes]) -> Record:
    """``draw``: the seed, once every secret opens the list this node revealed against."""
    session = _session(request)
    phase, data = _entry(state, session)
    if phase not in (_REVEALED, _DRAWN):
        raise OutOfOrderError("this node has not revealed its secret in this session")
    digest = data[SECRET_BYTES : 2 * SECRET_BYTES]
    secrets = decode_entries(request.get("secrets"))
    seed = check_secrets(session, digest, secrets)
    users = b"".join(int(u).to_bytes(_USER_BYTES, "big") for u in sorted(secrets))
    state[JOINT] = session + _DRAWN + seed + digest + users
    return {"drawn": 1}


def drawn_layout(state: Mapping[str, bytes], session: bytes) -> BatchLayout | None:
    """The batch layout of this node's draw in ``session``; None before a draw."""
    phase, data = _entry(state, session)
    if phase != _DRAWN:
        return None
    users = data[2 * SECRET_BYTES :]
    step = _USER_BYTES
    ids = [int.from_bytes(users[i : i + step], "big") for i in range(0, len(users), step)]
    return BatchLayout.drawn(data[:SECRET_BYTES], ids)


def check_graph_seed(params: SecAggParameters, state: Mapping[str, bytes]) -> None:
    """Refuse a sparse graph whose seed is not the one this node drew in the round's session.

    Raises
    ------
    PolicyViolationError
        Naming ``graph_seed``.
    """
    if params.complete_graph:
        return
    phase, data = _entry(state, params.session_id)
    if phase != _DRAWN:
        raise PolicyViolationError(
            "graph_seed", "a SecAgg+ graph needs a seed this node drew with the others; none was"
        )
    if params.graph_seed != graph_seed(data[:SECRET_BYTES]):
        raise PolicyViolationError(
            "graph_seed", "is not the seed this node drew with the others: the server chose it"
        )


def check_batch_layout(
    policy: PartyPolicy, params: SecAggParameters, state: Mapping[str, bytes]
) -> None:
    """Refuse batch positions that are not this node's draw, or none where its batches count.

    A node whose policy has batches (``batch_size > 1``) needs the round's participants
    placed by the layout it drew; any positions sent must be that layout's.

    Raises
    ------
    PolicyViolationError
        Naming ``batch_layout``.
    """
    if not params.positions:
        if policy.batch_size > 1:
            raise PolicyViolationError(
                "batch_layout",
                "batches need a layout this node drew with the others; the request places "
                "the users by id (whoever assigns the ids picks every user's batch mates)",
            )
        return
    layout = drawn_layout(state, params.session_id)
    if layout is None:
        raise PolicyViolationError(
            "batch_layout", "batch positions came, but this node drew no layout in the session"
        )
    if [layout.position.get(u) for u in params.participants] != list(params.positions):
        raise PolicyViolationError(
            "batch_layout",
            "the batch positions are not the layout this node drew: the server chose them",
        )


def _valid(
    replies: Mapping[int, Record], name: str, ok: Callable[[int, bytes], bool]
) -> dict[int, bytes]:
    """Each reply's ``name`` field, where ``ok(user, value)`` holds."""
    out = {}
    for u, reply in replies.items():
        value = reply.get(name)
        if isinstance(value, bytes) and ok(u, value):
            out[u] = value
    return out


@dataclass(frozen=True)
class JointDraw:
    """What a successful draw gives the server: the joint seed and the users who drew."""

    seed: bytes
    users: tuple[int, ...]

    @property
    def graph_seed(self) -> bytes:
        """The SecAgg+ graph's seed."""
        return graph_seed(self.seed)

    @property
    def layout(self) -> BatchLayout:
        """The batch layout of the users who drew."""
        return BatchLayout.drawn(self.seed, self.users)


def draw_joint(
    exchange: Exchange, r: int, session: bytes, users: Iterable[int]
) -> JointDraw | None:
    """The nodes' draw in ``session`` (logged as round ``r``'s), or None.

    None when fewer than :data:`~fedprivacy.secagg.params.MIN_PARTICIPANTS` committed, or a node
    that committed did not reveal a secret that opens its commitment (the nodes then refuse
    every sparse round, and every round with batches, until a later draw succeeds).
    """
    requests = {int(u): {"session": session} for u in users}
    replies = exchange(Stage.COMMIT, r, requests)
    commitments = _valid(replies, "commitment", lambda _, c: len(c) == SECRET_BYTES)
    if len(commitments) < MIN_PARTICIPANTS:
        return None
    listing = {"session": session, "commitments": encode_entries(commitments)}
    replies = exchange(Stage.REVEAL, r, dict.fromkeys(commitments, listing))
    secrets = _valid(replies, "secret", lambda u, s: commitment(session, u, s) == commitments[u])
    if secrets.keys() != commitments.keys():
        return None
    opening = {"session": session, "secrets": encode_entries(secrets)}
    exchange(Stage.DRAW, r, dict.fromkeys(secrets, opening))
    return JointDraw(joint_seed(session, secrets), tuple(sorted(secrets)))
