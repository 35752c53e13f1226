"""Everything the server can unmask from what it received in one round, computed exactly.

The server receives, from each user ``u`` of U3 (the users whose masked inputs arrived)::

    y_u = x_u + PRG(b_u) + sum over neighbours v of u in U2 of ±PRG(s_uv)

(U2: the users whose encrypted shares were relayed, hence the users ``u`` masked with). A mask
is *known* when the server can compute it from secrets it can reconstruct, that is from at least
``t`` received shares: ``PRG(b_u)`` when ``b_u`` is, ``PRG(s_uv)`` when ``s_sk_u`` or ``s_sk_v``
is, or when the round's key of that mask was revealed directly (a user that reuses its keys,
:mod:`fedprivacy.secagg.key_epoch`). Subtracting the known masks leaves ``y' = x + M r``
where ``r`` are the unknown masks (uniform and independent) and ``M`` their incidence matrix:
column ``b_u`` is ``e_u``, column ``s_uv`` is ``e_u - e_v`` (only ``e_u`` if ``v`` did not
submit). A combination ``z @ x`` is learnable exactly when ``z @ M == 0``: the learnable
span is the left null space of ``M``.

Because every column of ``M`` has one or two entries ``±1`` of opposite signs, that null space
has a combinatorial basis (the incidence matrix is totally unimodular): link ``u`` and ``v``
whenever ``s_uv`` is unknown and both submitted; a component is *pinned* when one of its users
has an unknown self mask or an unknown pairwise mask with a user outside U3. The indicator
vectors of the unpinned components form a basis of the learnable span.
:func:`mask_incidence` builds ``M`` itself, so the basis can be checked against an exact rank
(:func:`fedprivacy.linalg.exact_rank`).

Examples
--------
Four users on a ring, all submitted, every self-mask seed reconstructable and no mask key: the
server learns the total, and nothing else.

>>> ring = {u: frozenset({(u - 1) % 4, (u + 1) % 4}) for u in range(4)}
>>> everyone = frozenset(range(4))
>>> state = ReceivedState(everyone, everyone, ring, seeds=everyone, mask_keys=frozenset())
>>> server_view(state).components
(frozenset({0, 1, 2, 3}),)

If it could also reconstruct the mask keys of users 1 and 3, every pairwise mask would be known
and every input revealed:

>>> state = ReceivedState(everyone, everyone, ring, seeds=everyone, mask_keys=frozenset({1, 3}))
>>> server_view(state).components
(frozenset({0}), frozenset({1}), frozenset({2}), frozenset({3}))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.secagg.graph import Graph, components
from fedprivacy.secagg.messages import MaskedInput, Message, ShareKeys, ShareKind, UnmaskResponse
from fedprivacy.secagg.params import SecAggParameters


@dataclass(frozen=True)
class ReceivedState:
    """What the server holds at the end of a round (completed or aborted).

    Attributes
    ----------
    submitted : frozenset of int
        U3: the users whose masked inputs arrived.
    shared : frozenset of int
        U2: the users whose encrypted shares were relayed (the users each ``u`` masked with are
        its neighbours in U2).
    neighbours : mapping of int to frozenset of int
        The public neighbour graph of the round.
    seeds : frozenset of int
        Users whose self-mask seed ``b_u`` the server can reconstruct (``t`` shares received).
    mask_keys : frozenset of int
        Users whose mask key ``s_sk_u`` the server can reconstruct (``t`` shares received).
    pair_keys : frozenset of (int, int)
        Pairs ``(u, v)``, ``u < v``, whose pairwise mask key of this round was revealed
        directly (users that reuse their keys, :mod:`fedprivacy.secagg.key_epoch`).

    """

    submitted: frozenset[int]
    shared: frozenset[int]
    neighbours: Graph
    seeds: frozenset[int]
    mask_keys: frozenset[int]
    pair_keys: frozenset[tuple[int, int]] = frozenset()

    @classmethod
    def from_revealed(
        cls,
        submitted: frozenset[int],
        shared: frozenset[int],
        neighbours: Graph,
        revealed: Iterable[tuple[int, ShareKind]],
        threshold: int,
        *,
        pair_keys: Iterable[tuple[int, int]] = (),
    ) -> ReceivedState:
        """The state from the list of received shares.

        Parameters
        ----------
        submitted, shared, neighbours
            As in the class.
        revealed : iterable of (int, ShareKind)
            The owner and kind of every share received (one entry per share).
        threshold : int
            Shares needed to reconstruct a secret.
        pair_keys : iterable of (int, int)
            The pairs whose pairwise mask key of the round was revealed, in any order.

        Returns
        -------
        ReceivedState
            With ``seeds`` and ``mask_keys`` the owners of at least ``threshold`` shares.

        """
        counts = Counter(revealed)
        known = {
            kind: frozenset(o for (o, k), c in counts.items() if k is kind and c >= threshold)
            for kind in ShareKind
        }
        return cls(
            submitted,
            shared,
            neighbours,
            known[ShareKind.SELF_MASK_SEED],
            known[ShareKind.MASK_KEY],
            frozenset((min(u, v), max(u, v)) for u, v in pair_keys),
        )

    @classmethod
    def from_messages(cls, params: SecAggParameters, messages: Iterable[Message]) -> ReceivedState:
        """The state rebuilt from the client messages the server received in one round.

        Parameters
        ----------
        params : SecAggParameters
            The round's parameters (the graph and the threshold).
        messages : iterable of Message
            Every client message of the round (others are ignored).

        Returns
        -------
        ReceivedState
            U3 from the masked inputs, U2 from the shares, the secrets from the unmask
            responses: what an adversary holding the server's transcript can compute with.

        """
        got = [m for m in messages if m.header.round_index == params.round_index]
        revealed, pairs = [], []
        for m in got:
            if isinstance(m, UnmaskResponse):
                for owner, kind, _ in m.shares:
                    if kind is ShareKind.PAIR_MASK_KEY:
                        pairs.append((m.header.sender, owner))
                    else:
                        revealed.append((owner, kind))
        return cls.from_revealed(
            frozenset(m.header.sender for m in got if isinstance(m, MaskedInput)),
            frozenset(m.header.sender for m in got if isinstance(m, ShareKeys)),
            params.neighbours,
            revealed,
            params.threshold,
            pair_keys=pairs,
        )

    def pairwise_masks(self) -> list[tuple[int, int]]:
        """The pairwise masks in the received inputs, as pairs ``(u, v)`` with ``u`` in U3."""
        pairs: set[tuple[int, int]] = set()
        for u in self.submitted:
            for v in self.neighbours.get(u, frozenset()) & self.shared:
                pairs.add((min(u, v), max(u, v)) if v in self.submitted else (u, v))
        return sorted(pairs)

    def unknown_pairwise_masks(self) -> list[tuple[int, int]]:
        """The pairwise masks the server cannot compute (no endpoint's key, no revealed key)."""
        return [
            (u, v)
            for u, v in self.pairwise_masks()
            if u not in self.mask_keys
            and v not in self.mask_keys
            and (min(u, v), max(u, v)) not in self.pair_keys
        ]


@dataclass(frozen=True)
class ServerView:
    """The learnable span of the users' inputs.

    Attributes
    ----------
    components : tuple of frozenset of int
        Disjoint sets of users whose input sums the server can compute; their indicator
        vectors are a basis of everything it can compute (every learnable combination of the
        inputs is a linear combination of these sums). Largest first; empty when it learns
        nothing.

    """

    components: tuple[frozenset[int], ...]

    def matrix(self, columns: Sequence[int]) -> NDArray[np.int64]:
        """The basis as 0/1 rows over ``columns`` (user ids), one row per component.

        Parameters
        ----------
        columns : sequence of int
            User ids, one per column; must cover every user of every component.

        Returns
        -------
        numpy.ndarray
            Shape ``(len(components), len(columns))``.

        """
        index = {u: j for j, u in enumerate(columns)}
        out = np.zeros((len(self.components), len(index)), dtype=np.int64)
        for i, part in enumerate(self.components):
            out[i, [index[u] for u in part]] = 1
        return out


def mask_incidence(state: ReceivedState) -> tuple[tuple[int, ...], NDArray[np.int64]]:
    """The incidence matrix ``M`` of the unknown masks in the received inputs.

    Parameters
    ----------
    state : ReceivedState
        What the server received.

    Returns
    -------
    rows : tuple of int
        The users of U3, one per row, sorted.
    matrix : numpy.ndarray
        Shape ``(|U3|, unknown masks)``: ``e_u`` for an unknown ``b_u``; ``+1`` at the smaller
        and ``-1`` at the larger id for an unknown ``s_uv`` (the signs the clients use), with
        only the submitting user's entry when the other did not submit.

    """
    rows = tuple(sorted(state.submitted))
    index = {u: i for i, u in enumerate(rows)}
    columns: list[dict[int, int]] = [{u: 1} for u in rows if u not in state.seeds]
    for u, v in state.unknown_pairwise_masks():
        column = {u: 1 if u < v else -1}
        if v in index:
            column[v] = -column[u]
        columns.append(column)
    out = np.zeros((len(rows), len(columns)), dtype=np.int64)
    for j, column in enumerate(columns):
        for u, sign in column.items():
            out[index[u], j] = sign
    return rows, out


def server_view(state: ReceivedState) -> ServerView:
    """The sums of inputs the server can compute from what it received.

    Parameters
    ----------
    state : ReceivedState
        What the server received (see :meth:`SecAggServer.received_state
        <fedprivacy.secagg.server.SecAggServer.received_state>`).

    Returns
    -------
    ServerView
        A basis of the left null space of :func:`mask_incidence`, as disjoint user sets.

    """
    linked: dict[int, set[int]] = {u: set() for u in state.submitted}
    pinned = {u for u in state.submitted if u not in state.seeds}
    for u, v in state.unknown_pairwise_masks():
        if v in linked:
            linked[u].add(v)
            linked[v].add(u)
        else:
            pinned.add(u)
    graph = {u: frozenset(vs) for u, vs in linked.items()}
    free = [part for part in components(graph, state.submitted) if not part & pinned]
    return ServerView(tuple(free))
