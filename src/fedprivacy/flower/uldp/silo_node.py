"""A silo's side of a cross-silo deployment: local per-user training and Protocol 1's silo.

:class:`SiloNode` answers the four cross-silo stages (:mod:`fedprivacy.flower.messaging.stages`)
with :class:`~fedprivacy.secagg.private_weighting.silo.PrivateWeightingSilo`, whose state lives in
the node's state mapping between messages (:mod:`fedprivacy.secagg.private_weighting.state`; on
Flower the ClientApp's ``context.state``, kept at the SuperNode). What never leaves the silo: its
records, the histogram row ``n_{s,u}``, its X25519 private key and agreements, the shared seed,
the per-user updates and its noise, which it draws from OS randomness with the standard
deviation its own policy sets (:func:`~fedprivacy.flower.uldp.silo_policy.silo_noise_std_of`:
``sigma C / sqrt(|S|)`` with ``sigma`` at least the policy's floor), never from a value the
server sends.

The server proposes, the silo decides: before it computes anything, the silo checks the
session the server proposes (the configuration, Protocol 1's parameters, the Paillier modulus
actually sent) against its operator's :class:`~fedprivacy.policy.PartyPolicy`
(:func:`~fedprivacy.flower.uldp.silo_policy.check_proposal`: noise floor, clip, key size, test
keys), again at every round, and answers each round index once, across sessions: a server that
starts a new session cannot have a round it already got answered again. A refusal is a
:class:`~fedprivacy.errors.PolicyViolationError` naming the parameter (an ``error`` reply; the
silo logs it as a warning). The parameters must also be
:func:`~fedprivacy.uldp.deployment.session_parameters` of the configuration (same users,
silos, model size, clip, noise bound, key size), so that the two cannot disagree.

Fault injection (tests and demonstrations): ``replay@R`` sends, in round ``R``, the previous
reply again; ``garbage@R`` sends well-formed but wrong ciphertexts in round ``R`` (each one
multiplied by an encryption of a random offset), which the server detects only after
decryption (its round is aborted).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from dataclasses import dataclass

import numpy as np

from fedprivacy.crypto.paillier_public import PaillierPublicKey
from fedprivacy.errors import PolicyViolationError
from fedprivacy.flower.faults.node_faults import fault_fires
from fedprivacy.flower.messaging.identity import signed_hello
from fedprivacy.flower.messaging.stages import Record, Stage, decode_array, field, model_digest
from fedprivacy.flower.nodes.node_policy import (
    answer_once,
    consistency_check,
    spend_budget,
    train_once,
)
from fedprivacy.flower.nodes.party_state import PERSISTENT
from fedprivacy.flower.nodes.stage_handler import StageHandler, single_threaded
from fedprivacy.flower.uldp.silo_policy import check_proposal, proposed_config, silo_noise_std_of
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.private_weighting.errors import MalformedMessageError, OutOfOrderError
from fedprivacy.secagg.private_weighting.messages import (
    EncryptedWeights,
    MaskedUpdate,
    PaillierKeyAnnouncement,
    decode_message,
    encode_message,
)
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.silo import PrivateWeightingSilo
from fedprivacy.secagg.private_weighting.state import (
    decode_params,
    dump_silo,
    encode_params,
    load_silo,
)
from fedprivacy.uldp.config import UldpConfig

__all__ = ["SiloNode"]

_LOG = logging.getLogger("fedprivacy.silo")


def _garbage(update: MaskedUpdate, key: PaillierPublicKey) -> MaskedUpdate:
    """Well-formed but wrong ciphertexts: each one times ``Enc(uniform offset)`` (a fault)."""
    n, n2 = key.n_mpz, key.n_square
    values = tuple(
        int(c * (1 + (secrets.randbelow(key.n - 1) + 1) * n) % n2) for c in update.ciphertexts
    )
    return dataclasses.replace(update, ciphertexts=values)


@dataclass
class SiloNode(StageHandler):
    """One silo's node.

    Parameters
    ----------
    silo : int
        The silo this node is (its ``fedprivacy-silo`` node configuration).
    fault : str
        Fault injection: ``"replay@R"`` makes the silo send, in round ``R``, its reply of the
        previous stage again (the server must refuse it with the protocol's typed error);
        ``"garbage@R"`` makes it send well-formed but wrong ciphertexts in round ``R``.
    data_dir : str, optional
        The silo's data directory (its ``data-dir`` node configuration; default
        ``$FEDPRIVACY_DATA``).
    policy : PartyPolicy
        Its operator's policy (:func:`fedprivacy.flower.uldp.silo_policy.silo_policy` is that of an
        operator who agrees with a configuration). The default sets no noise floor, so a silo
        without a policy takes part in nothing.
    """

    silo: int
    fault: str = ""
    data_dir: str | None = None
    policy: PartyPolicy = dataclasses.field(default_factory=PartyPolicy)

    @property
    def party(self) -> int:
        """The silo this node is."""
        return self.silo

    def _hello(self, request: Record, state: dict[str, bytes]) -> Record:
        return signed_hello(self.silo, self.policy, request)

    def _restore(
        self, state: dict[str, bytes]
    ) -> tuple[PrivateWeightingParameters, PrivateWeightingSilo]:
        if "silo" not in state:
            raise OutOfOrderError(f"silo {self.silo} has no session: the setup has not started")
        params = decode_params(state["params"])
        return params, load_silo(params, state["silo"], silo=self.silo)

    def _keep(self, state: dict[str, bytes], silo: PrivateWeightingSilo, reply: bytes) -> Record:
        state["silo"] = dump_silo(silo)
        state["last"] = reply
        return {"message": reply}

    def _check(
        self, config: UldpConfig, params: PrivateWeightingParameters, modulus_bits: int
    ) -> None:
        """:func:`check_proposal` against this silo's policy; a refusal is logged."""
        try:
            check_proposal(self.policy, config, params, modulus_bits)
        except PolicyViolationError as exc:
            _LOG.warning("silo %d refuses the server's proposal: %s", self.silo, exc)
            raise

    # ------------------------------------------------------------------ setup
    def _key(self, request: Record, state: dict[str, bytes]) -> Record:
        from fedprivacy.uldp.deployment import session_parameters, silo_side

        config = field(request, "config", str)
        params = decode_params(field(request, "params", bytes))
        key = decode_message(field(request, "message", bytes))
        if not isinstance(key, PaillierKeyAnnouncement):
            raise MalformedMessageError("the silo-key stage carries no Paillier key")
        self._check(proposed_config(config), params, key.modulus.bit_length())
        side = silo_side(config, self.data_dir)
        expected = session_parameters(side.config, params.n_params, params.session_id)
        if params != expected:
            raise MalformedMessageError(
                "the session's parameters are not those of the configuration this silo accepts"
            )
        if params.n_params != side.n_params:
            raise MalformedMessageError(
                f"the session is for {params.n_params} parameters, the model has {side.n_params}"
            )
        records = side.fed.histogram()[self.silo]
        silo = PrivateWeightingSilo(params, self.silo, records)
        reply = encode_message(silo.on_paillier_key(key, consistency_check(self.policy)))
        # outlive the session: a round is answered once, and the budget counts every round
        kept = {k: state[k] for k in PERSISTENT if k in state}
        state.clear()
        state.update(config=config.encode(), params=encode_params(params))
        state.update(kept)
        return self._keep(state, silo, reply)

    def _roster(self, request: Record, state: dict[str, bytes]) -> Record:
        _, silo = self._restore(state)
        check = consistency_check(self.policy)  # node authentication: every key signed
        roster = None if check is None else check.roster
        shares = silo.on_roster(field(request, "message", bytes), roster)
        return self._keep(state, silo, b"" if shares is None else encode_message(shares))

    def _seed(self, request: Record, state: dict[str, bytes]) -> Record:
        _, silo = self._restore(state)
        silo.on_seed_delivery(field(request, "message", bytes))
        return self._keep(state, silo, encode_message(silo.blinded_histogram()))

    # ------------------------------------------------------------------ rounds
    def _answer_once(self, state: dict[str, bytes], request: Record, session: bytes) -> None:
        """Refuse a round this silo answered in this session, or its model in any session."""
        r = field(request, "round", int)
        weights = decode_message(field(request, "message", bytes))
        if not isinstance(weights, EncryptedWeights) or weights.header.round_index != r:
            raise MalformedMessageError(f"the silo-round stage of round {r} carries no weights")
        answer_once(state, r, session)
        train_once(state, r, model_digest(request))

    def _round(self, request: Record, state: dict[str, bytes]) -> Record:
        from fedprivacy.uldp.deployment import silo_deltas, silo_side

        params, silo = self._restore(state)
        r = field(request, "round", int)
        every = range(params.n_silos)  # every silo answers every round
        if fault_fires(self.fault, "replay", r, self.silo, every):
            return {"message": state["last"]}
        self._answer_once(state, request, params.session_id)
        spend_budget(self.policy, state)  # every round counts: the silo does not see the sample
        side = silo_side(state["config"].decode(), self.data_dir)  # cached since the setup
        self._check(side.config, params, silo.public_key.bits)
        model = decode_array(field(request, "model", bytes), np.float32)
        if model.size != params.n_params:
            raise MalformedMessageError(
                f"the model has {model.size} parameters, the session {params.n_params}"
            )
        keys = field(request, "keys", int)
        with single_threaded():
            deltas = silo_deltas(side, self.silo, model, keys)
        message = field(request, "message", bytes)
        update = silo.on_weights(message, deltas, silo_noise_std_of(self.policy, side.config))
        if fault_fires(self.fault, "garbage", r, self.silo, every):
            update = _garbage(update, silo.public_key)
        return self._keep(state, silo, encode_message(update))


SiloNode.handlers = {
    Stage.HELLO: SiloNode._hello,
    Stage.SILO_KEY: SiloNode._key,
    Stage.SILO_ROSTER: SiloNode._roster,
    Stage.SILO_SEED: SiloNode._seed,
    Stage.SILO_ROUND: SiloNode._round,
}
