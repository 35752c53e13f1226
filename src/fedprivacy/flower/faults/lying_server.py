"""A lying FedAvg server, for fault injection: what it proposes instead of the configuration's.

``fedprivacy flower deploy --forge NAME=VALUE,...`` (and the tests) make the ServerApp's
:class:`~fedprivacy.flower.fedavg.training.DeployedTraining` propose weaker parameters than its own
configuration, to show that every node refuses them under its own policy
(:mod:`fedprivacy.flower.nodes.node_policy`), names the parameter, and that the run still ends with
its report. The names (:data:`FEDAVG_FORGES`):

====================  ===================================================================
``noise=V``           the noise variance asked of each party (``noise=`` asks for none)
``threshold=T``       the SecAgg threshold
``degree=K``          a SecAgg+ graph of K neighbours (its threshold a majority of each group)
``clip=C``            the clip in the configuration sent to the nodes
``noise_multiplier``  the noise multiplier in the configuration sent to the nodes
``plaintext=1``       a plaintext ``train`` request before each secure round
``repeat=1``          every ``advertise`` sent twice (a round answered again)
``partial=1``         the server claims one member of a batch dropped: it unmasks part of it
``keys=1``            key substitution: every user's key roster carries keys of the server's
                      own for its neighbours (their owners' signatures left as they were)
``model=1``           model inconsistency (Pasquini et al.): every user but the first gets an
                      all-zero model, the first the real one
``graph=1``           a SecAgg+ graph from a seed of the server's own (ground until its
                      colluders neighbour a victim) instead of the one the nodes drew
``layout=1``          batches of the server's own (users by id: whoever assigns the ids
                      picks every user's batch mates) instead of the layout the nodes drew
====================  ===================================================================

``;`` separates rounds: ``"noise=;threshold=2"`` forges round 0, 2, ... with the first and
round 1, 3, ... with the second (:func:`forges_by_round`), so one deployment can show several
lies.

Examples
--------
>>> forge = parse_forge("threshold=2,noise=", FEDAVG_FORGES)
>>> forge
{'threshold': '2', 'noise': ''}
>>> forges_by_round("noise=;plaintext=1")
[{'noise': ''}, {'plaintext': '1'}]
"""

from __future__ import annotations

import dataclasses
import hashlib
import tomllib
from collections.abc import Mapping
from typing import Any

import tomli_w

from fedprivacy.crypto.keys import generate_keypair
from fedprivacy.flower.faults.forge import parse_forge
from fedprivacy.participation.layout import batches_of
from fedprivacy.secagg.messages import KeyRoster
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.server import AggregationPolicy

__all__ = [
    "FEDAVG_FORGES",
    "forge_config",
    "forge_params",
    "forge_policy",
    "forge_models",
    "forge_rosters",
    "forges_by_round",
    "parse_forge",
]

FEDAVG_FORGES = (
    "noise",
    "threshold",
    "degree",
    "clip",
    "noise_multiplier",
    "plaintext",
    "repeat",
    "partial",
    "keys",
    "model",
    "graph",
    "layout",
)


def forges_by_round(text: str) -> list[dict[str, str]]:
    """The forges of ``text``, one per round in turn (``;`` separates them); ``[]`` for none.

    Raises
    ------
    ParameterError
        Named ``forge``, for a name outside :data:`FEDAVG_FORGES`.
    """
    parts = [parse_forge(part, FEDAVG_FORGES) for part in text.split(";")]
    return [] if not any(parts) else parts


def forge_config(config_toml: str, forge: Mapping[str, str]) -> str:
    """The configuration sent to the nodes, with a forged ``clip`` or ``noise_multiplier``."""
    changes = {k: float(forge[k]) for k in ("clip", "noise_multiplier") if k in forge}
    if not changes:
        return config_toml
    return tomli_w.dumps({**tomllib.loads(config_toml), **changes})


def forge_params(params: SecAggParameters, forge: Mapping[str, str]) -> SecAggParameters:
    """The round's parameters with a forged ``degree``, ``layout``, ``graph``, ``threshold``."""
    if "degree" in forge:
        params = SecAggParameters.create(
            params.session_id,
            params.round_index,
            params.participants,
            params.dimension,
            params.codec,
            weighted=params.weighted,
            degree=int(forge["degree"]),
            graph_seed=params.graph_seed or params.session_id,
            positions=params.positions,
        )
    if "layout" in forge:  # by id; reversed where the nodes' draw happened to give that
        by_id = params.participants
        if by_id == params.positions:
            by_id = by_id[::-1]
        params = dataclasses.replace(params, positions=by_id)
    if "graph" in forge:
        own = hashlib.sha256(b"the server's own graph" + params.graph_seed).digest()
        params = dataclasses.replace(params, graph_seed=own)
    if "threshold" not in forge:
        return params
    return dataclasses.replace(params, threshold=int(forge["threshold"]))


def forge_policy(
    policy: AggregationPolicy, forge: Mapping[str, str], params: SecAggParameters, batch_size: int
) -> AggregationPolicy:
    """The batch policy, or with ``partial`` one that leaves out a member of a whole batch."""
    if "partial" not in forge:
        return policy

    def partial(submitted: frozenset[int]) -> frozenset[int]:
        chosen = policy(submitted)
        grouped = batches_of(chosen, batch_size, params.position)
        whole = [m for m in grouped.values() if len(m) > 1]
        return chosen - {max(whole[0])} if whole else chosen

    return partial


def forge_rosters(
    rosters: Mapping[int, KeyRoster], forge: Mapping[str, str]
) -> Mapping[int, KeyRoster]:
    """The key rosters, or with ``keys`` each user's with keys of the server's own for the others.

    The server would know the private keys: the user's shares sealed "for its neighbours" and
    its pairwise masks would be the server's to open (:mod:`fedprivacy.secagg.signed_keys`).
    """
    if "keys" not in forge:
        return rosters

    def substituted(user: int, roster: KeyRoster) -> KeyRoster:
        entries = tuple(
            entry if entry[0] == user else (entry[0], *_fresh_pair(), entry[3])
            for entry in roster.keys
        )
        return KeyRoster(roster.header, entries)

    return {u: substituted(u, roster) for u, roster in rosters.items()}


def _fresh_pair() -> tuple[bytes, bytes]:
    return generate_keypair().public_bytes, generate_keypair().public_bytes


def forge_models(
    requests: Mapping[int, dict[str, Any]], forge: Mapping[str, str]
) -> dict[int, dict[str, Any]]:
    """The opening requests, or with ``model`` an all-zero model for every user but the first.

    A crafted model that zeroes the others' updates would leave the first user's update alone
    in the sum (Pasquini et al., CCS 2022); an all-zero vector stands for it.
    """
    out = dict(requests)
    if "model" not in forge:
        return out
    for u in sorted(out)[1:]:
        model = out[u].get("model")
        if isinstance(model, bytes):
            out[u] = {**out[u], "model": bytes(len(model))}
    return out
