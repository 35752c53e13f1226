"""A node's user id is bound to its key: forged, replayed, unknown and duplicate claims.

The adversary is a malicious node: it claims another user's id (to take its place in a batch),
replays another node's signed hello, or claims a user twice. Each such node is left out of the
roster with an event; the run goes on with the others (the old code aborted on a duplicate).
"""

from __future__ import annotations

from pathlib import Path

from fedprivacy.crypto.signing import Roster
from fedprivacy.flower.messaging.identity import admit, new_nonce
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_auth import generate_node_keys
from fedprivacy.policy import PartyPolicy


def _nodes(tmp_path: Path, users: range) -> tuple[dict[int, Node], Roster]:
    keys = generate_node_keys(tmp_path, users)
    roster = Roster({u: k.public.read_text() for u, k in keys.items()})
    nodes = {u: Node(u, policy=PartyPolicy(signing_key=str(keys[u].private))) for u in users}
    return nodes, roster


def test_signed_claims_are_admitted(tmp_path: Path) -> None:
    nodes, roster = _nodes(tmp_path, range(3))
    nonce = new_nonce()
    replies = {100 + u: n.handle({"stage": "hello", "nonce": nonce}, {}) for u, n in nodes.items()}
    admitted, refused = admit(replies, nonce, roster)
    assert admitted == {0: 100, 1: 101, 2: 102} and refused == []


def test_a_node_claiming_another_user_is_dropped_and_the_others_go_on(tmp_path: Path) -> None:
    nodes, roster = _nodes(tmp_path, range(3))
    impostor = Node(1, policy=nodes[2].policy)  # user 2's machine claims to be user 1
    nonce = new_nonce()
    replies = {100 + u: n.handle({"stage": "hello", "nonce": nonce}, {}) for u, n in nodes.items()}
    replies[200] = impostor.handle({"stage": "hello", "nonce": nonce}, {})
    admitted, refused = admit(replies, nonce, roster)
    assert admitted == {0: 100, 1: 101, 2: 102}
    assert [(e["node"], e["user"]) for e in refused] == [(200, 1)]
    assert "does not verify" in refused[0]["detail"]


def test_a_replayed_hello_of_an_earlier_nonce_is_refused(tmp_path: Path) -> None:
    nodes, roster = _nodes(tmp_path, range(2))
    old = nodes[0].handle({"stage": "hello", "nonce": new_nonce()}, {})
    nonce = new_nonce()
    admitted, refused = admit({7: old}, nonce, roster)
    assert admitted == {} and [e["node"] for e in refused] == [7]


def test_unknown_unsigned_and_duplicate_claims_drop_those_nodes_only(tmp_path: Path) -> None:
    nodes, roster = _nodes(tmp_path, range(2))
    nonce = new_nonce()
    replies = {u: n.handle({"stage": "hello", "nonce": nonce}, {}) for u, n in nodes.items()}
    stranger_keys = generate_node_keys(tmp_path / "other", [5])
    stranger = Node(5, policy=PartyPolicy(signing_key=str(stranger_keys[5].private)))
    replies[5] = stranger.handle({"stage": "hello", "nonce": nonce}, {})
    replies[6] = Node(0).handle({"stage": "hello", "nonce": nonce}, {})  # no key: unsigned
    admitted, refused = admit(replies, nonce, roster)
    assert admitted == {0: 0, 1: 1}
    assert sorted(e["node"] for e in refused) == [5, 6]
    # without a roster a duplicate claim drops both claimants instead of aborting the run
    admitted, refused = admit({1: {"user": 0}, 2: {"user": 0}, 3: {"user": 1}}, nonce, None)
    assert admitted == {1: 3} and sorted(e["node"] for e in refused) == [1, 2]
