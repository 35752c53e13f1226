"""Connected components of the SecAgg+ neighbour graph restricted to a set of users.

Pairwise masks only cancel along edges of the graph, so the server can unmask the sum of each
connected component of ``G[S]`` separately (``S`` the aggregated set). Server and clients both
refuse to unmask when ``G[S]`` is disconnected; both use :func:`components`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Graph = Mapping[int, frozenset[int]]
"""Each user's neighbours (symmetric)."""


def components(graph: Graph, users: Iterable[int]) -> list[frozenset[int]]:
    """Connected components of the subgraph of ``graph`` induced by ``users``.

    Parameters
    ----------
    graph : mapping of int to frozenset of int
        Each user's neighbours; users missing from it have none.
    users : iterable of int
        The vertex set of the induced subgraph.

    Returns
    -------
    list of frozenset of int
        The components, largest first (ties: smallest user id first); empty for no users.

    Examples
    --------
    >>> ring = {u: frozenset({(u - 1) % 4, (u + 1) % 4}) for u in range(4)}
    >>> components(ring, {0, 1, 2})
    [frozenset({0, 1, 2})]
    >>> components(ring, {0, 2})
    [frozenset({0}), frozenset({2})]
    """
    remaining = set(users)
    found: list[frozenset[int]] = []
    while remaining:
        start = min(remaining)
        remaining.discard(start)
        seen = {start}
        stack = [start]
        while stack:
            for v in graph.get(stack.pop(), frozenset()) & remaining:
                remaining.discard(v)
                seen.add(v)
                stack.append(v)
        found.append(frozenset(seen))
    return sorted(found, key=lambda c: (-len(c), min(c)))


def describe(parts: Iterable[frozenset[int]]) -> str:
    """Sizes of the components, for error messages (``"3 components of sizes 8, 1, 1"``)."""
    sizes = [len(c) for c in parts]
    return f"{len(sizes)} components of sizes {', '.join(map(str, sizes))}"
