"""A party's privacy policy: what a user's node or a silo accepts, set by its own operator.

The server proposes; each party decides. A :class:`PartyPolicy` is written by whoever runs the
node or silo, on that machine (a TOML file named in the node's configuration, see
:meth:`PartyPolicy.for_node`), never taken from the server. Every request is checked
against it *before anything is computed*; a weaker request raises
:class:`~fedprivacy.errors.PolicyViolationError` naming the parameter it would weaken.

=====================  ======================================================================
field                  meaning (the adversary: a server that lies about the parameters)
=====================  ======================================================================
``noise_multiplier``   the least noise the party adds (distributed noise multiplier z of a
                       user's node; ULDP's sigma of a silo); ``None``: the party adds none
``clip``               the L2 clip the party applies; a request for a larger one is refused
``min_threshold``      the smallest SecAgg threshold t accepted; ``None``: a strict majority
                       of each user's sharing group (the user and its ``h`` share holders),
                       ``floor((h + 1) / 2) + 1``: all ``n`` parties for SecAgg, the
                       neighbourhood for SecAgg+ (as Bell et al.). Two disjoint groups cannot
                       both reach it, which the survivor-list consistency check relies on
``min_degree``         optional: the fewest share holders (SecAgg+ neighbours) a user of this
                       party accepts, capped at ``n - 1`` (a value of ``n - 1`` or more accepts
                       the complete graph only); ``None``: computed by the party for each
                       round: the complete graph up to 32 parties
                       (:data:`~fedprivacy.secagg.params.COMPLETE_GRAPH_UP_TO`, the server's
                       default), above it Bell et al.'s degree for the round's ``n`` and the
                       party's ``corrupt_fraction`` (:func:`~fedprivacy.secagg.degree_bound.
                       secure_degree`). Against a server colluding with users, fewer
                       neighbours need fewer colluders
``corrupt_fraction``   the fraction of a round's parties this party assumes may collude with
                       the server (0.05 by default), for its default ``min_degree``
``key_rounds``         the most secure rounds the party's node masks with one pair of SecAgg
                       keys (:mod:`fedprivacy.secagg.key_epoch`); 1 (the default): fresh keys
                       every round. Above 1 the node never shares its masking key and reveals
                       round-scoped pairwise keys instead; the server then skips its
                       ``advertise`` stage while the keys last
``min_key_bits``       the smallest Paillier modulus accepted (3072 bits by default)
``allow_test_keys``    accept a key marked as a test key (below 2048 bits); never by default
``batch_size``         T of batch partitioning: the aggregated set must be a union of whole
                       batches ``{bT, ..., bT + T - 1}`` of the round's parties
``allow_plaintext``    answer a plaintext (unmasked) round; never by default
``allow_unauthen-``    answer a secure round without node authentication (no ``signing_key``
``ticated``            and ``roster``): an active server can then substitute the keys and read
                       any single input; never by default
``noise_mode``         how the party's noise survives dropouts (:mod:`fedprivacy.dp.
                       noise_modes`): ``over-provisioned`` (its floor for the threshold alone)
                       or ``exact`` (removable excess; only with the consistency check, i.e.
                       ``signing_key`` and ``roster``); a request in the other mode is refused
``epsilon_budget``     optional: the party stops contributing once its own epsilon at
                       ``delta`` (its rounds composed at its own noise floor, RDP, no
                       amplification: the server knows the sample) would exceed it
``signing_key``        path of the party's private key (its SuperNode authentication key):
                       it signs the party's identity (:mod:`fedprivacy.flower.messaging.identity`)
``roster``             path of the federation's public keys (:class:`~fedprivacy.crypto.
                       signing.Roster`), from the operator who admits the nodes
``state_dir``          folder of the party's state that outlives every run: its spent budget,
                       the last round it answered, its key epoch (``party-ID.state``,
                       :mod:`fedprivacy.flower.nodes.party_state`); by default the policy file's
                       folder. A party without a policy file keeps them per run
=====================  ======================================================================

Examples
--------
>>> policy = PartyPolicy(noise_multiplier=1.0, clip=0.5, batch_size=2)
>>> policy.check_threshold(6, holders=9)
>>> try:
...     policy.check_threshold(2, holders=9)
... except PolicyViolationError as exc:
...     print(exc.name, "|", exc)
threshold | threshold: 2 is below this party's minimum 6 (a strict majority of 10 parties)
>>> policy.check_aggregated({0, 1, 4, 5}, participants=range(6))
>>> try:
...     policy.check_aggregated({0, 1, 4}, participants=range(6))
... except PolicyViolationError as exc:
...     print(exc.name)
batch_size
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedprivacy._validation import require_int
from fedprivacy.config import Config
from fedprivacy.config_sections import DEFAULT_NOISE_MODE
from fedprivacy.dp.noise_modes import NOISE_MODES
from fedprivacy.errors import ParameterError, PolicyViolationError
from fedprivacy.participation.layout import batches_of
from fedprivacy.secagg.degree_bound import DEFAULT_CORRUPT_FRACTION, secure_degree
from fedprivacy.secagg.params import COMPLETE_GRAPH_UP_TO

__all__ = ["DEFAULT_MIN_KEY_BITS", "PartyPolicy", "majority"]

DEFAULT_MIN_KEY_BITS = 3072
#: The node-configuration key that names a party's policy file.
POLICY_KEY = "fedprivacy-policy"
#: This machine's directory of policies by node (Flower's simulation runtime).
POLICY_DIR_ENV = "FEDPRIVACY_POLICY_DIR"


def majority(parties: int) -> int:
    """A strict majority of ``parties``: ``floor(parties / 2) + 1`` (at least 2).

    >>> majority(10), majority(7)
    (6, 4)
    """
    return max(2, int(parties) // 2 + 1)


@dataclass(frozen=True)
class PartyPolicy(Config):
    """One party's policy (see the module docstring); the defaults are the safe ones."""

    noise_multiplier: float | None = None
    clip: float | None = None
    min_threshold: int | None = None
    min_degree: int | None = None
    corrupt_fraction: float = DEFAULT_CORRUPT_FRACTION
    key_rounds: int = 1
    min_key_bits: int = DEFAULT_MIN_KEY_BITS
    allow_test_keys: bool = False
    batch_size: int = 1
    allow_plaintext: bool = False
    allow_unauthenticated: bool = False
    noise_mode: str = DEFAULT_NOISE_MODE
    epsilon_budget: float | None = None
    delta: float | None = None
    signing_key: str = ""
    roster: str = ""
    state_dir: str = ""

    def __post_init__(self) -> None:
        for name in ("noise_multiplier", "clip", "epsilon_budget", "delta"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"must be a finite number > 0, got {value}")
        if self.noise_multiplier is not None and self.clip is None:
            raise ParameterError("clip", "is required with a noise_multiplier")
        if self.min_threshold is not None:
            require_int("min_threshold", self.min_threshold, minimum=2)
        if self.min_degree is not None:
            require_int("min_degree", self.min_degree, minimum=2)
        if not 0.0 <= self.corrupt_fraction < 0.5:
            raise ParameterError(
                "corrupt_fraction", f"must lie in [0, 0.5), got {self.corrupt_fraction}"
            )
        require_int("key_rounds", self.key_rounds, minimum=1)
        require_int("min_key_bits", self.min_key_bits, minimum=512)
        require_int("batch_size", self.batch_size, minimum=1)
        NOISE_MODES.lookup(self.noise_mode)
        if (self.epsilon_budget is None) != (self.delta is None):
            raise ParameterError("epsilon_budget", "and delta go together")
        if self.epsilon_budget is not None and self.noise_multiplier is None:
            raise ParameterError("epsilon_budget", "needs the party's noise_multiplier")

    # ------------------------------------------------------------------ loading
    @classmethod
    def for_node(cls, node_config: Mapping[str, Any], node: int) -> PartyPolicy:
        """The policy a node's operator configured, read on the node's machine.

        The file named by the node configuration's ``fedprivacy-policy``, else
        ``$FEDPRIVACY_POLICY_DIR/node-NODE.toml`` if present (for Flower's simulation runtime,
        whose virtual nodes have no node configuration of their own: an environment variable of
        this machine, never a value the server sends), else the safe defaults (no plaintext
        rounds, majority threshold, 3072-bit keys, no noise of the party's own, state per run).

        Raises
        ------
        ParameterError
            If the file is missing or not a valid policy.
        """
        if POLICY_KEY in node_config:
            path = Path(str(node_config[POLICY_KEY]))
        else:
            folder = os.environ.get(POLICY_DIR_ENV, "")
            path = Path(folder) / f"node-{int(node)}.toml"
            if not (folder and path.exists()):
                return cls()
        return cls.from_policy_file(path)

    @classmethod
    def from_policy_file(cls, path: Path) -> PartyPolicy:
        """The policy in ``path``; its ``state_dir`` is the file's folder unless it names one.

        Examples
        --------
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "node-3.toml"
        >>> _ = path.write_text("clip = 0.5")
        >>> PartyPolicy.from_policy_file(path).state_dir == str(path.parent)
        True
        """
        policy = cls.from_toml(path)
        if policy.state_dir:
            return policy
        return dataclasses.replace(policy, state_dir=str(path.parent))

    # ------------------------------------------------------------------ checks
    def check_secure(self, secure: bool) -> None:
        """Refuse a plaintext round unless the policy allows it."""
        if not secure and not self.allow_plaintext:
            raise PolicyViolationError(
                "secure", "a plaintext round was requested; this party answers secure rounds only"
            )

    def check_authenticated(self) -> None:
        """Refuse a secure round without node authentication unless the policy allows it.

        >>> PartyPolicy(allow_unauthenticated=True).check_authenticated()
        >>> PartyPolicy().check_authenticated()
        Traceback (most recent call last):
        ...
        fedprivacy.errors.PolicyViolationError: allow_unauthenticated: a secure round \
without node authentication (this party names no signing_key and roster): an active server \
could substitute the keys and read any single input
        """
        if not (self.signing_key and self.roster) and not self.allow_unauthenticated:
            raise PolicyViolationError(
                "allow_unauthenticated",
                "a secure round without node authentication (this party names no signing_key "
                "and roster): an active server could substitute the keys and read any single "
                "input",
            )

    def check_threshold(self, threshold: int, holders: int) -> None:
        """Refuse a SecAgg threshold below the minimum (default: a majority of ``holders + 1``)."""
        group = holders + 1
        least = self.min_threshold if self.min_threshold is not None else majority(group)
        why = "" if self.min_threshold is not None else f" (a strict majority of {group} parties)"
        if threshold < least:
            raise PolicyViolationError(
                "threshold", f"{threshold} is below this party's minimum {least}{why}"
            )

    def check_degree(self, holders: int, parties: int) -> None:
        """Refuse fewer share holders than the party's floor for a round of ``parties``.

        The floor is ``min_degree`` (capped at ``parties - 1``) when the policy sets it, else
        computed here, never taken from the server: the complete graph up to
        :data:`~fedprivacy.secagg.params.COMPLETE_GRAPH_UP_TO` parties, above it
        :func:`~fedprivacy.secagg.degree_bound.secure_degree` for ``corrupt_fraction``.

        Examples
        --------
        >>> PartyPolicy(min_degree=12).check_degree(holders=9, parties=10)  # complete graph
        >>> try:
        ...     PartyPolicy(min_degree=12).check_degree(holders=8, parties=40)
        ... except PolicyViolationError as exc:
        ...     print(exc)
        degree: 8 share holders of 40 parties is below this party's minimum 12
        >>> try:
        ...     PartyPolicy().check_degree(holders=2, parties=10)
        ... except PolicyViolationError as exc:
        ...     print(exc)
        degree: 2 share holders of 10 parties is below this party's minimum 9 (the complete \
graph up to 32 parties)
        >>> PartyPolicy().check_degree(holders=10, parties=100)
        >>> PartyPolicy(corrupt_fraction=0.2).check_degree(holders=14, parties=100)
        Traceback (most recent call last):
        ...
        fedprivacy.errors.PolicyViolationError: degree: 14 share holders of 100 parties is \
below this party's minimum 40 (Bell et al.'s bound for 20 % corrupt parties)
        """
        if self.min_degree is not None:
            least, why = min(self.min_degree, parties - 1), ""
        elif parties <= COMPLETE_GRAPH_UP_TO:
            least, why = parties - 1, f" (the complete graph up to {COMPLETE_GRAPH_UP_TO} parties)"
        else:
            least = secure_degree(parties, self.corrupt_fraction)
            why = f" (Bell et al.'s bound for {100 * self.corrupt_fraction:g} % corrupt parties)"
        if holders < least:
            raise PolicyViolationError(
                "degree",
                f"{holders} share holders of {parties} parties is below this party's minimum "
                f"{least}{why}",
            )

    def check_noise(self, requested: float | None) -> None:
        """Refuse a noise multiplier below the floor (``None``: no noise requested)."""
        floor = self.noise_multiplier
        if floor is not None and (requested is None or requested < floor):
            asked = "no noise" if requested is None else f"noise multiplier {requested:g}"
            raise PolicyViolationError(
                "noise_multiplier", f"{asked} requested; this party adds at least {floor:g}"
            )

    def check_clip(self, requested: float | None) -> None:
        """Refuse a clip larger than the party's (or none where the party has one)."""
        if self.clip is not None and (requested is None or requested > self.clip):
            asked = "no clip" if requested is None else f"clip {requested:g}"
            raise PolicyViolationError(
                "clip", f"{asked} requested; this party clips at {self.clip:g}"
            )

    def check_key(self, key_bits: int, test_key: bool) -> None:
        """Refuse a Paillier key smaller than the minimum, or a test key unless allowed."""
        if test_key and not self.allow_test_keys:
            raise PolicyViolationError(
                "key_bits", f"a {key_bits}-bit test key was proposed; this party refuses test keys"
            )
        if key_bits < self.min_key_bits and not (test_key and self.allow_test_keys):
            raise PolicyViolationError(
                "key_bits", f"{key_bits} bits is below this party's minimum {self.min_key_bits}"
            )

    def check_batch_size(self, requested: int) -> None:
        """Refuse a batch size ``T`` that is not a multiple of the party's.

        Whole batches of a multiple of ``T`` are unions of whole batches of ``T``.
        """
        if int(requested) % self.batch_size:
            raise PolicyViolationError(
                "batch_size",
                f"T = {requested} requested; this party's batches are of {self.batch_size} "
                "(T must be a multiple of it)",
            )

    def check_aggregated(
        self,
        aggregated: Iterable[int],
        participants: Iterable[int],
        position: Mapping[int, int] | None = None,
    ) -> None:
        """Refuse an aggregated set that is not a union of whole batches of the participants.

        ``position``: each participant's place in the batch layout (by default its id).
        """
        chosen = frozenset(int(u) for u in aggregated)
        for b, members in batches_of(participants, self.batch_size, position).items():
            inside = members & chosen
            if inside and inside != members:
                raise PolicyViolationError(
                    "batch_size",
                    f"the aggregated set holds part of batch {b} (users {sorted(inside)}; the "
                    f"batch is {sorted(members)}): it must be a union of whole batches of "
                    f"{self.batch_size}",
                )

    def check_budget(self, contributions: int) -> None:
        """Refuse one more contribution once the party's own epsilon would exceed its budget.

        ``contributions`` rounds so far, each at least the party's noise floor; the epsilon
        is their composition (:func:`~fedprivacy.dp.accounting.epsilon_for`, RDP, no
        amplification by sampling: the server knows who was selected).

        >>> policy = PartyPolicy(noise_multiplier=1.0, clip=1.0, epsilon_budget=5.0, delta=1e-5)
        >>> policy.check_budget(0)
        >>> try:
        ...     policy.check_budget(1)
        ... except PolicyViolationError as exc:
        ...     print(exc.name)
        epsilon_budget
        """
        if self.epsilon_budget is None:
            return
        from fedprivacy.dp.accounting import epsilon_for

        assert self.noise_multiplier is not None and self.delta is not None
        spent = epsilon_for(self.noise_multiplier, int(contributions) + 1, self.delta)
        if spent > self.epsilon_budget:
            raise PolicyViolationError(
                "epsilon_budget",
                f"one more round would bring this party to epsilon {spent:.3f} at delta "
                f"{self.delta:g} after {int(contributions)} rounds, over its budget "
                f"{self.epsilon_budget:g}",
            )
