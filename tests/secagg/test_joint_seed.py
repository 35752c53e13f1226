"""The joint seed: uniform from one party's secret, bound to every commitment fixed before."""

from __future__ import annotations

import os

import pytest

from fedprivacy.secagg.errors import MalformedMessageError, ProtocolViolationError
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

SESSION = bytes(range(16))


def _draw(users: range) -> tuple[dict[int, bytes], bytes]:
    secrets = {u: os.urandom(SECRET_BYTES) for u in users}
    commitments = {u: commitment(SESSION, u, s) for u, s in secrets.items()}
    return secrets, commitments_digest(SESSION, commitments)


def test_the_secrets_that_open_the_fixed_list_give_the_seed_and_nothing_else_does() -> None:
    secrets, digest = _draw(range(5))
    assert check_secrets(SESSION, digest, secrets) == joint_seed(SESSION, secrets)
    for changed in (
        {**secrets, 3: os.urandom(SECRET_BYTES)},  # a secret chosen after the others were seen
        {u: s for u, s in secrets.items() if u != 4},  # a committed party left out
        {**secrets, 9: os.urandom(SECRET_BYTES)},  # a party added after the list was fixed
    ):
        with pytest.raises(ProtocolViolationError):
            check_secrets(SESSION, digest, changed)
    with pytest.raises(ProtocolViolationError):  # the same secrets, another session
        check_secrets(bytes(16), digest, secrets)


def test_the_seed_is_uniform_in_one_honest_secret_whatever_the_others_are() -> None:
    """The others' secrets fixed (the server's choice), one party's fresh secret: 256 seeds'
    graph seeds have bits that are each set about half the time."""
    fixed = {u: bytes([u]) * SECRET_BYTES for u in range(1, 6)}
    seeds = [graph_seed(joint_seed(SESSION, {**fixed, 0: os.urandom(32)})) for _ in range(256)]
    assert len(set(seeds)) == 256
    ones = [sum((s[0] >> bit) & 1 for s in seeds) for bit in range(8)]
    assert all(80 <= n <= 176 for n in ones), ones  # 5.8 standard deviations either side


def test_entries_round_trip_and_malformed_lists_are_typed_errors() -> None:
    entries = {7: os.urandom(32), 2: os.urandom(32)}
    assert decode_entries(encode_entries(entries)) == entries
    good = encode_entries(entries)
    for bad in (b"", good[:-1], good + good[:40], "text", None):
        with pytest.raises(MalformedMessageError):
            decode_entries(bad)
