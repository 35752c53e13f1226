"""Keys reused across rounds (issue #31), judged from everything the server received.

The adversary is the server: honest-but-curious (it follows the protocol and keeps every byte it
received over the rounds of a key epoch), then one that lies about who dropped. Rounds are
driven by hand so that the test holds exactly the messages the server received.

The reference attack: a naive reuse (the fresh-key protocol run with the same keys every round)
lets the server rebuild a user's masking key in a round it drops from, and then strip every
mask off that user's input of an earlier round. With a :class:`KeyEpoch` no masking key is ever
shared, and what the server can compute from all rounds is only each round's sum.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.keys import agree, keypair_from_private_bytes
from fedprivacy.crypto.prg import MaskExpander, reduce
from fedprivacy.crypto.shamir import Share, combine_shares
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.secagg import (
    KeyEpoch,
    ProtocolViolationError,
    SecAggClient,
    SecAggParameters,
    SecAggServer,
    Stage,
    UnrecoverableSecretError,
    WrongRoundError,
    dump_client,
    load_client,
    run_round,
)
from fedprivacy.secagg.derivation import pairwise_mask_key, self_mask_key
from fedprivacy.secagg.messages import (
    MaskedInput,
    Message,
    ShareKeys,
    ShareKind,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.party import pairwise_sign
from fedprivacy.secagg.server_view import ReceivedState, server_view

N, THRESHOLD, D = 6, 4, 5
SESSION = os.urandom(16)
CODEC = FixedPointCodec.for_sum(1.0, N, 32)


def params(round_index: int) -> SecAggParameters:
    return SecAggParameters.create(SESSION, round_index, range(N), D, CODEC, threshold=THRESHOLD)


class Transcript:
    """One hand-driven round; ``received`` is every byte string the server got, by sender."""

    def __init__(
        self,
        round_index: int,
        clients: Mapping[int, SecAggClient],
        registered: Mapping[int, tuple[bytes, bytes]],
        updates: Mapping[int, np.ndarray],
    ) -> None:
        self.params = params(round_index)
        self.server = SecAggServer(self.params, registered=registered)
        self.clients = dict(clients)
        self.updates = updates
        self.received: list[bytes] = []

    def step(self, users: Collection[int], reply: Callable[[int, SecAggClient], Message]) -> None:
        for u in sorted(users):
            data = encode_message(reply(u, self.clients[u]))
            self.received.append(data)
            self.server.receive(data)

    def run(self, drop_before: Mapping[int, Stage]) -> None:
        """The four stages; a user in ``drop_before`` sends nothing from that stage on."""

        def alive(stage: Stage) -> set[int]:
            return {u for u in self.clients if drop_before.get(u, Stage.UNMASK + 1) > stage}

        known = self.server.advertised
        self.step(alive(Stage.ADVERTISE_KEYS) - known, lambda u, c: c.advertise_keys())
        rosters = self.server.finish_keys()
        self.step(alive(Stage.SHARE_KEYS), lambda u, c: c.share_keys(rosters[u]))
        deliveries = self.server.finish_shares()
        self.step(
            alive(Stage.MASKED_INPUT) & deliveries.keys(),
            lambda u, c: c.masked_input(deliveries[u], self.updates[u]),
        )
        requests = self.server.finish_inputs()
        self.step(alive(Stage.UNMASK) & requests.keys(), lambda u, c: c.unmask(requests[u]))

    def messages(self) -> list[Message]:
        return [decode_message(data) for data in self.received]

    def masked(self, user: int) -> np.ndarray:
        (vector,) = [
            m.vector for m in self.messages() if isinstance(m, MaskedInput)
            and m.header.sender == user
        ]  # fmt: skip
        return np.array(vector)

    def shares_of(self, owner: int, kind: ShareKind) -> list[Share]:
        return [
            Share.from_bytes(raw)
            for m in self.messages()
            if isinstance(m, UnmaskResponse)
            for o, k, raw in m.shares
            if (o, k) == (owner, kind)
        ]

    def state(self) -> ReceivedState:
        """What the server received, rebuilt from the bytes alone."""
        return ReceivedState.from_messages(self.params, self.messages())


def updates_for(round_index: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(100 + round_index)
    return {u: rng.uniform(-0.1, 0.1, D) for u in range(N)}


def strip_masks(
    t: Transcript, user: int, seed: bytes, masking_key: bytes, public: Mapping[int, bytes]
) -> np.ndarray:
    """``user``'s input of round ``t``, from its masked input, ``b_u`` and its masking key."""
    p = t.params
    private = keypair_from_private_bytes(masking_key).private
    expander = MaskExpander(p.vector_length, p.codec.bits)
    acc = t.masked(user).astype(expander.dtype)
    expander.subtract_from(acc, self_mask_key(seed, p, user))
    for v in sorted(p.neighbours[user]):
        key = pairwise_mask_key(agree(private, public[v]), p, user, v)
        expander.combine(acc, key, -pairwise_sign(user, v))
    reduce(acc, p.codec.bits)
    return np.asarray(p.codec.decode_sum(acc, 1))


def two_rounds(naive: bool) -> tuple[Transcript, Transcript, dict[int, KeyEpoch]]:
    """Round 0: everyone aggregated. Round 1: the victim 5 shares, then drops before masking."""
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=10) for u in range(N)}
    registered: dict[int, tuple[bytes, bytes]] = {}
    transcripts = []
    for r, drops in ((0, {}), (1, {5: Stage.MASKED_INPUT})):
        if naive:  # the fresh-key protocol with the same keys every round
            clients = {u: SecAggClient(params(r), u) for u in range(N)}
            for u, c in clients.items():
                c._enc, c._mask = epochs[u].keypairs()
        else:
            clients = {u: SecAggClient(params(r), u, epoch=epochs[u]) for u in range(N)}
        t = Transcript(r, clients, registered, updates_for(r))
        t.run(drops)
        result = t.server.finish_unmask()
        expected = sum(t.updates[u] for u in result.aggregated)
        assert np.allclose(result.total, expected, atol=1e-6)
        registered = {} if naive else t.server.reused_keys()
        transcripts.append(t)
    return transcripts[0], transcripts[1], epochs


def test_naive_key_reuse_reveals_an_earlier_input() -> None:
    """The attack the epoch prevents, carried out on the naive reuse's bytes."""
    first, second, epochs = two_rounds(naive=True)
    victim = 5
    seed = combine_shares(first.shares_of(victim, ShareKind.SELF_MASK_SEED), THRESHOLD)
    key = combine_shares(second.shares_of(victim, ShareKind.MASK_KEY), THRESHOLD)
    public = {u: e.keypairs()[1].public_bytes for u, e in epochs.items()}
    recovered = strip_masks(first, victim, seed, key, public)
    assert np.allclose(recovered, first.updates[victim], atol=1e-6)


def test_epoch_shares_no_key_and_reveals_only_each_rounds_sum() -> None:
    first, second, epochs = two_rounds(naive=False)
    victim = 5
    for t in (first, second):
        kinds = {k for m in t.messages() if isinstance(m, UnmaskResponse) for _, k, _ in m.shares}
        assert ShareKind.MASK_KEY not in kinds
        assert server_view(t.state()).components == (frozenset(t.server.view().components[0]),)
    assert server_view(first.state()).components == (frozenset(range(N)),)
    assert server_view(second.state()).components == (frozenset(range(N)) - {victim},)
    # round 1 revealed the victim's pairwise keys of round 1 only: applied to round 0 they fail
    seed = combine_shares(first.shares_of(victim, ShareKind.SELF_MASK_SEED), THRESHOLD)
    revealed = {
        m.header.sender: raw
        for m in second.messages()
        if isinstance(m, UnmaskResponse)
        for o, k, raw in m.shares
        if (o, k) == (victim, ShareKind.PAIR_MASK_KEY)
    }
    assert sorted(revealed) == [0, 1, 2, 3, 4]
    p = first.params
    expander = MaskExpander(p.vector_length, p.codec.bits)
    acc = first.masked(victim).astype(expander.dtype)
    expander.subtract_from(acc, self_mask_key(seed, p, victim))
    for w, raw in revealed.items():
        expander.combine(acc, raw, -pairwise_sign(victim, w))
    reduce(acc, p.codec.bits)
    assert not np.allclose(p.codec.decode_sum(acc, 1), first.updates[victim], atol=0.5)
    assert all(e.rounds == (1 if u == victim else 2) for u, e in epochs.items())


def test_registered_users_skip_the_advertise_stage() -> None:
    _, second, _ = two_rounds(naive=False)
    kinds = [m.header.kind.name for m in second.messages()]
    assert "ADVERTISE_KEYS" not in kinds
    assert all(m.seed_commitment is not None for m in second.messages() if isinstance(m, ShareKeys))


def test_a_server_leaving_out_a_submitted_user_learns_nothing_of_it() -> None:
    """Lying server: user 2 sent its input, the server leaves it out (policy) and unmasks."""
    outcome_states: list[ReceivedState] = []
    fresh = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(N)}
    result = run_round(
        params(0),
        updates_for(0),
        epochs=fresh,
        policy=lambda arrived: arrived - {2},
        observer=lambda server: outcome_states.append(server.received_state()),
    ).result
    assert result.aggregated == (0, 1, 3, 4, 5)
    (state,) = outcome_states
    assert state.pair_keys == {(0, 2), (1, 2), (2, 3), (2, 4), (2, 5)}
    assert 2 not in state.seeds
    assert server_view(state).components == (frozenset({0, 1, 3, 4, 5}),)


def test_a_pair_nobody_can_reveal_aborts_the_round_and_reveals_nothing() -> None:
    """User 0 drops after masking and user 5 (reusing its keys) before: k_05 is lost."""
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(N)}
    clients = {u: SecAggClient(params(0), u, epoch=epochs[u]) for u in range(N)}
    t = Transcript(0, clients, {}, updates_for(0))
    t.run({0: Stage.UNMASK, 5: Stage.MASKED_INPUT})
    with pytest.raises(UnrecoverableSecretError, match="user 0 did not reveal"):
        t.server.finish_unmask()
    assert server_view(t.state()).components == ()


def test_fresh_and_reused_keys_in_one_round() -> None:
    """Users 0-2 reuse keys, 3-5 draw fresh ones; one of each drops before masking."""
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(3)}
    updates = updates_for(0)
    states: list[ReceivedState] = []
    three = SecAggParameters.create(SESSION, 0, range(N), D, CODEC, threshold=3)
    result = run_round(
        three,
        updates,
        epochs=epochs,
        dropouts={1: Stage.MASKED_INPUT, 4: Stage.MASKED_INPUT},
        observer=lambda server: states.append(server.received_state()),
    ).result
    assert result.aggregated == (0, 2, 3, 5)
    assert np.allclose(result.total, sum(updates[u] for u in (0, 2, 3, 5)), atol=1e-6)
    (state,) = states
    assert state.mask_keys == {4} and state.pair_keys == {(0, 1), (1, 2), (1, 3), (1, 5)}
    assert server_view(state).components == (frozenset({0, 2, 3, 5}),)


def test_the_epoch_refuses_a_replayed_round_another_session_and_expiry() -> None:
    epoch = KeyEpoch.start(SESSION, 1, max_rounds=2)
    for r in (0, 3):
        run_round(params(r), updates_for(r), epochs={1: epoch})
    assert (epoch.rounds, epoch.last_round, epoch.expired) == (2, 3, True)
    with pytest.raises(WrongRoundError, match="masked their 2 rounds"):
        SecAggClient(params(4), 1, epoch=epoch)
    young = KeyEpoch.start(SESSION, 1, max_rounds=5)
    young.record(3)
    with pytest.raises(WrongRoundError, match="already masked in round 3"):
        SecAggClient(params(2), 1, epoch=young)
    other = SecAggParameters.create(os.urandom(16), 9, range(N), D, CODEC)
    with pytest.raises(WrongRoundError, match="another session"):
        SecAggClient(other, 1, epoch=young)


def test_a_registered_user_must_commit_with_its_shares() -> None:
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(N)}
    registered = {
        u: (e.keypairs()[0].public_bytes, e.keypairs()[1].public_bytes, b"")
        for u, e in epochs.items()
    }
    server = SecAggServer(params(0), registered=registered)
    rosters = server.finish_keys()
    reply = SecAggClient(params(0), 0, epoch=epochs[0]).share_keys(rosters[0])
    stripped = ShareKeys(reply.header, reply.ciphertexts)
    with pytest.raises(ProtocolViolationError, match="did not commit"):
        server.receive(stripped)
    server.receive(reply)


def test_a_reusing_client_survives_a_restart_between_stages() -> None:
    """The state written between stages keeps 'no key share' for reusing neighbours."""
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(N)}
    clients = {u: SecAggClient(params(0), u, epoch=epochs[u]) for u in range(N)}
    t = Transcript(0, clients, {}, updates_for(0))
    known = t.server.advertised
    t.step(set(range(N)) - known, lambda u, c: c.advertise_keys())
    rosters = t.server.finish_keys()
    t.step(range(N), lambda u, c: c.share_keys(rosters[u]))
    deliveries = t.server.finish_shares()
    t.step(range(N), lambda u, c: c.masked_input(deliveries[u], t.updates[u]))
    restored = load_client(t.params, dump_client(t.clients[3]), user=3)
    assert all(key is None for _, key in restored._held.values())
    t.clients[3] = restored
    requests = t.server.finish_inputs()
    t.step(range(N), lambda u, c: c.unmask(requests[u]))
    assert t.server.finish_unmask().aggregated == tuple(range(N))


def test_reused_keys_under_the_consistency_check() -> None:
    """Against an active server: every node signs S; a dropout before masking, two rounds."""
    signing = {u: SigningKey.generate() for u in range(N)}
    epochs = {u: KeyEpoch.start(SESSION, u, max_rounds=5) for u in range(N)}
    registered: dict[int, tuple[bytes, bytes]] = {}
    for r in range(2):
        servers: list[SecAggServer] = []
        updates = updates_for(r)
        result = run_round(
            params(r),
            updates,
            epochs=epochs,
            registered=registered,
            signing_keys=signing,
            dropouts={4: Stage.MASKED_INPUT},
            observer=servers.append,
        ).result
        assert result.aggregated == (0, 1, 2, 3, 5)
        assert np.allclose(result.total, sum(updates[u] for u in result.aggregated), atol=1e-6)
        registered = servers[0].reused_keys()
        assert servers[0].view().components == (frozenset(result.aggregated),)
    assert sorted(registered) == [0, 1, 2, 3, 4, 5]  # 4 shared before it dropped
