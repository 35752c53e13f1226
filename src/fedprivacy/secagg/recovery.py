"""Reconstruction of a round's secrets that survives wrong Shamir shares.

To unmask, :meth:`~fedprivacy.secagg.server.SecAggServer.finish_unmask` rebuilds the self-mask
seed ``b_u`` of every aggregated user and the mask key ``s_sk_v`` of every dropped neighbour, each
from ``t`` shares sent by different holders. Every secret can be checked: ``b_u`` against the
commitment ``H(b_u)`` that ``u`` advertised, ``s_sk_v`` against its public key ``s_pk_v``. A
wrong share among the ``t`` used makes the check fail (each share enters the secret with a
non-zero Lagrange coefficient). :class:`SecretRecovery` then searches, among all the shares that
arrived, ``t`` whose secret passes its check, and names the shares that disagree with it.

**Who is named.** A secret that passes its check is the right one. The ``t`` shares that gave it
fix a polynomial through ``(0, secret)``; every other share is compared with that polynomial at
its point. Two distinct polynomials of degree ``t - 1`` through ``(0, secret)`` agree on at most
``t - 2`` other points, so when more than ``(n + t - 2) / 2`` of the ``n`` shares lie on it, it is
the only polynomial that so many shares fit, and the shares off it are wrong unless more than
``(n - t + 2) / 2`` holders lied together: those are named (:class:`BadShare`). With fewer on
it, the secret is still used but nobody is named (:attr:`SecretRecovery.unattributed`). A
wrong share was sent wrong by its holder or dealt wrong by the secret's owner; the server cannot
tell which (the shares travelled encrypted under keys it never holds), so both are named in the
description. A wrong share outside the first ``t`` tried is never looked at when those pass:
it changes nothing.

**Search.** Holders already named in the round are tried last. Subsets are tried by how many of
the first shares they leave out, fewest first (one wrong share among ``n > t`` costs at most
``t + 1`` tries), at most :data:`MAX_SUBSETS` per secret; if none passes, the secret cannot be
recovered and the round is aborted (:class:`UnrecoverableSecretError`). Only the secrets the
protocol already lets the server rebuild are ever rebuilt, so the search reveals nothing more.

Examples
--------
>>> from fedprivacy.crypto.shamir import Share, split_secret
>>> secret = bytes(range(32))
>>> shares = {h - 1: s for h, s in split_secret(secret, [1, 2, 3, 4], 3).items()}
>>> wrong = shares[0]
>>> shares[0] = Share(wrong.x, ((wrong.values[0] + 1) % (2**31 - 1), *wrong.values[1:]), 32)
>>> recovery = SecretRecovery(threshold=3)
>>> recovery.recover(7, ShareKind.SELF_MASK_SEED, shares, lambda s: s == secret) == secret
True
>>> recovery.offenders
(0,)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from fedprivacy.crypto.keys import KEY_BYTES
from fedprivacy.crypto.shamir import PRIME, Share, combine_shares, lagrange_cached
from fedprivacy.errors import ShamirError
from fedprivacy.secagg.messages import ShareKind
from fedprivacy.secagg.snapshot import SEED_BYTES

__all__ = [
    "MAX_SUBSETS",
    "SECRET_BYTES",
    "BadShare",
    "SecretCheck",
    "SecretRecovery",
]

MAX_SUBSETS = 4096
"""The most subsets of ``t`` shares tried for one secret before the round is aborted."""

SECRET_BYTES = {ShareKind.SELF_MASK_SEED: SEED_BYTES, ShareKind.MASK_KEY: KEY_BYTES}
"""The length of the secret behind each kind of share."""

SecretCheck = Callable[[bytes], bool]
"""Whether a reconstructed secret matches its commitment or public key."""


@dataclass(frozen=True)
class BadShare:
    """A share shown wrong by a verified reconstruction of its secret.

    Attributes
    ----------
    holder : int
        The user who sent the share (the offender, unless the owner dealt it wrong).
    owner : int
        The user whose secret it is a share of.
    kind : ShareKind
        Of the self-mask seed or of the mask key.
    """

    holder: int
    owner: int
    kind: ShareKind

    def describe(self) -> str:
        """One line for a log: who sent a wrong share of what.

        Examples
        --------
        >>> BadShare(2, 5, ShareKind.MASK_KEY).describe()
        'user 2 sent a wrong share of the mask key of user 5 (or user 5 dealt it wrong)'
        """
        what = "self-mask seed" if self.kind is ShareKind.SELF_MASK_SEED else "mask key"
        return (
            f"user {self.holder} sent a wrong share of the {what} of user {self.owner} "
            f"(or user {self.owner} dealt it wrong)"
        )


def _combine(shares: Sequence[Share], threshold: int) -> bytes | None:
    try:
        return combine_shares(shares, threshold)
    except ShamirError:  # a limb out of range: not the secret
        return None


def _value_at(points: Sequence[Share], x: int) -> tuple[int, ...]:
    """The values at ``x`` of the polynomials (one per limb) through ``points`` (Lagrange)."""
    weights = lagrange_cached(tuple(a.x for a in points), x).tolist()
    limbs = len(points[0].values)
    return tuple(
        sum(w * s.values[k] for w, s in zip(weights, points, strict=True)) % PRIME
        for k in range(limbs)
    )


def _subsets(order: Sequence[int], threshold: int) -> Iterator[list[int]]:
    """Every ``threshold``-subset of ``order`` once, by how many of the first ones it leaves out.

    The first is ``order[:threshold]``; then, for ``k = 1, 2, ...``, the subsets of
    ``order[:threshold + k]`` that keep its last element and leave out ``k`` of the others.

    Examples
    --------
    >>> list(_subsets([5, 6, 7, 8], 3))
    [[5, 6, 7], [6, 7, 8], [5, 7, 8], [5, 6, 8]]
    """
    yield list(order[:threshold])
    for k in range(1, len(order) - threshold + 1):
        for left_out in itertools.combinations(range(threshold + k - 1), k):
            gone = set(left_out)
            yield [h for i, h in enumerate(order[: threshold + k]) if i not in gone]


@dataclass
class SecretRecovery:
    """Rebuilds a round's secrets from shares of which some may be wrong (module docstring).

    Parameters
    ----------
    threshold : int
        The round's Shamir threshold ``t``.
    max_subsets : int
        The most subsets of ``t`` shares tried per secret.

    Attributes
    ----------
    bad : list of BadShare
        The shares named wrong so far, in the order found.
    unattributed : list of tuple of (int, ShareKind)
        Secrets recovered around wrong shares that could not be told apart from right ones.
    """

    threshold: int
    max_subsets: int = MAX_SUBSETS
    bad: list[BadShare] = field(default_factory=list)
    unattributed: list[tuple[int, ShareKind]] = field(default_factory=list)

    @property
    def offenders(self) -> tuple[int, ...]:
        """The holders of the :attr:`bad` shares, sorted."""
        return tuple(sorted({b.holder for b in self.bad}))

    def recover(
        self, owner: int, kind: ShareKind, shares: Mapping[int, Share], check: SecretCheck
    ) -> bytes | None:
        """The secret of ``owner`` from ``shares`` (holder -> share), or ``None``.

        Parameters
        ----------
        owner : int
            Whose secret it is.
        kind : ShareKind
            Which secret (named in :attr:`bad`).
        shares : mapping of int to Share
            The share each holder sent, at least ``threshold`` of them.
        check : callable
            Whether a candidate secret matches its commitment or public key.

        Returns
        -------
        bytes or None
            The secret that passed ``check``; ``None`` when no subset tried gives one.
        """
        suspects = set(self.offenders)
        order = sorted(shares, key=lambda h: (h in suspects, shares[h].x))
        subsets = _subsets(order, self.threshold)
        for tried, used in enumerate(itertools.islice(subsets, self.max_subsets)):
            secret = _combine([shares[h] for h in used], self.threshold)
            if secret is not None and check(secret):
                if tried:  # the first t failed: find who is off the right polynomial
                    self._blame(owner, kind, shares, used)
                return secret
        return None

    def _blame(
        self, owner: int, kind: ShareKind, shares: Mapping[int, Share], used: Sequence[int]
    ) -> None:
        points = [shares[h] for h in used]
        off = [
            h
            for h in sorted(set(shares) - set(used))
            if _value_at(points, shares[h].x) != shares[h].values
        ]
        n, t = len(shares), self.threshold
        if 2 * (n - len(off)) > n + t - 2:
            self.bad.extend(BadShare(h, owner, kind) for h in off)
        else:
            self.unattributed.append((owner, kind))
