"""The unmasking stage of :class:`~fedprivacy.secagg.server.SecAggServer` (a mixin).

:meth:`ServerUnmasking.finish_unmask` rebuilds every aggregated user's self-mask seed and every
dropped neighbour's mask key from the unmask responses, each checked against its commitment or
public key (wrong shares are left out and named, :mod:`fedprivacy.secagg.recovery`), and removes
the masks from the sum of the aggregated inputs (:func:`~fedprivacy.secagg.masking.unmask_sum`).
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from fedprivacy.crypto.keys import agree, keypair_from_private_bytes
from fedprivacy.crypto.shamir import Share
from fedprivacy.secagg.derivation import pairwise_mask_key, seed_commitment
from fedprivacy.secagg.errors import RoundAbortedError, UnrecoverableSecretError
from fedprivacy.secagg.masking import unmask_sum
from fedprivacy.secagg.messages import ServerStage, ShareKeys, ShareKind
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.recovery import BadShare, SecretCheck, SecretRecovery
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.round_keys import RoundKeys

__all__ = ["ServerUnmasking"]


class _Server(Protocol):
    """What :class:`ServerUnmasking` uses of :class:`~fedprivacy.secagg.server.SecAggServer`."""

    params: SecAggParameters
    seconds: dict[str, float]
    model: bytes
    stage: ServerStage
    _keys: RoundKeys
    _shares: dict[int, ShareKeys]
    _inputs: dict[int, np.ndarray]
    _responses: dict[int, dict[int, tuple[ShareKind, Share]]]
    _excess: dict[int, np.ndarray]
    _aggregated: frozenset[int]
    _recovery: SecretRecovery | None

    def _expect(self, stage: ServerStage) -> None: ...

    def _need(self, count: int, what: str) -> None: ...

    def _abort(
        self, reason: str, error: type[RoundAbortedError] = RoundAbortedError
    ) -> RoundAbortedError: ...

    def _timed(self, name: str, start: float) -> None: ...

    def _recover(
        self, owner: int, kind: ShareKind, pieces: dict[tuple[int, ShareKind], dict[int, Share]]
    ) -> bytes: ...

    def _secret_check(self, owner: int, kind: ShareKind) -> SecretCheck: ...


class ServerUnmasking:
    """Stage 3 of the server: the secrets rebuilt, the masks removed, the sum decoded."""

    def finish_unmask(self: _Server) -> AggregationResult:
        """Close stage 3: reconstruct the secrets, remove the masks and decode the sum.

        Returns
        -------
        AggregationResult
            The aggregate of the users chosen in :meth:`finish_inputs`.

        Every secret is checked against its commitment or public key; a wrong share among the
        ``threshold`` used is then left out and the secret rebuilt from other shares
        (:class:`~fedprivacy.secagg.recovery.SecretRecovery`); :attr:`bad_shares` names the
        wrong shares found. The sum is the same as with honest holders.

        Raises
        ------
        RoundAbortedError
            If fewer than ``threshold`` users answered, or some secret has fewer than
            ``threshold`` shares among them.
        UnrecoverableSecretError
            A :class:`RoundAbortedError` (and :class:`ProtocolViolationError`): no
            ``threshold`` of some secret's shares give a secret that matches its public key or
            commitment (too many wrong shares); no aggregate is produced.

        """
        self._expect(ServerStage.UNMASK)
        start = time.perf_counter()
        p = self.params
        self._need(len(self._responses), "users answered the unmask request")
        pieces: dict[tuple[int, ShareKind], dict[int, Share]] = {}
        for holder, shares in self._responses.items():
            for owner, (kind, share) in shares.items():
                pieces.setdefault((owner, kind), {})[holder] = share
        aggregated = sorted(self._aggregated)
        dropped = sorted(
            v for v in self._shares.keys() - self._aggregated if p.neighbours[v] & self._aggregated
        )
        missing = self._keys.missing_pairs(dropped, p.neighbours, self._aggregated)
        if missing:
            u, v = missing[0]
            raise self._abort(
                f"user {u} did not reveal its pairwise mask key with user {v}, who reuses its "
                "keys and is left out: nobody else can",
                UnrecoverableSecretError,
            )
        fresh = [v for v in dropped if v not in self._keys.reusing]
        pair_keys = {(u, v): k for (u, v), k in self._keys.pair_keys.items() if v in dropped}
        self._recovery = SecretRecovery(p.threshold)
        seeds = {u: self._recover(u, ShareKind.SELF_MASK_SEED, pieces) for u in aggregated}
        mask_keys = {v: self._recover(v, ShareKind.MASK_KEY, pieces) for v in fresh}
        private = {v: keypair_from_private_bytes(raw).private for v, raw in mask_keys.items()}
        self._timed("reconstruct", start)
        start = time.perf_counter()
        for v in fresh:
            for u in sorted(p.neighbours[v] & self._aggregated):
                agreement = agree(private[v], self._keys.public(u)[1])
                pair_keys[u, v] = pairwise_mask_key(agreement, p, u, v, self.model)
        inputs = {u: self._inputs[u] for u in aggregated}
        acc = unmask_sum(p, inputs, seeds, pair_keys, self._excess)
        removed = tuple(sorted(self._excess))  # exact noise mode (only aggregated users send it)
        total = p.codec.decode_sum(acc, len(aggregated))
        self._timed("unmask", start)
        self._inputs.clear()
        self.stage = ServerStage.DONE
        seconds = dict(self.seconds)
        return AggregationResult(tuple(aggregated), acc, total, p.weighted, seconds, removed)

    _recovery: SecretRecovery | None = None  # the unmasking's reconstruction, once it started

    @property
    def bad_shares(self) -> tuple[BadShare, ...]:
        """The wrong unmasking shares :meth:`finish_unmask` found (and left out), in order."""
        return () if self._recovery is None else tuple(self._recovery.bad)

    @property
    def offenders(self) -> tuple[int, ...]:
        """The users who sent the :attr:`bad_shares` (or were dealt them), sorted."""
        return () if self._recovery is None else self._recovery.offenders

    def _recover(
        self: _Server,
        owner: int,
        kind: ShareKind,
        pieces: dict[tuple[int, ShareKind], dict[int, Share]],
    ) -> bytes:
        assert self._recovery is not None
        shares = pieces.get((owner, kind), {})
        if len(shares) < self.params.threshold:
            raise self._abort(
                f"only {len(shares)} shares of the {kind.name} of user {owner}; the threshold is "
                f"{self.params.threshold}"
            )
        secret = self._recovery.recover(owner, kind, shares, self._secret_check(owner, kind))
        if secret is None:
            against = "commitment" if kind is ShareKind.SELF_MASK_SEED else "public key"
            raise self._abort(
                f"no {self.params.threshold} of the {len(shares)} shares of the {kind.name} of "
                f"user {owner} give a secret that matches its {against}",
                UnrecoverableSecretError,
            )
        return secret

    def _secret_check(self: _Server, owner: int, kind: ShareKind) -> SecretCheck:
        if kind is ShareKind.SELF_MASK_SEED:
            commitment = self._keys.commitment(owner)
            return lambda seed: seed_commitment(seed, self.params, owner) == commitment
        public = self._keys.public(owner)[1]
        return lambda raw: keypair_from_private_bytes(raw).public_bytes == public
