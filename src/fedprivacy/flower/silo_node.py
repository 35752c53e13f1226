"""A silo's side of a cross-silo deployment: local per-user training and Protocol 1's silo.

:class:`SiloNode` answers the four cross-silo stages (:mod:`fedprivacy.flower.stages`) with
:class:`~fedprivacy.uldp.private_weighting.silo.PrivateWeightingSilo`, whose state lives in the
node's state mapping between messages (:mod:`fedprivacy.uldp.private_weighting.state`; on Flower
the ClientApp's ``context.state``, kept at the SuperNode). What never leaves the silo: its
records, the histogram row ``n_{s,u}``, its X25519 private key and agreements, the shared seed,
the per-user updates and its noise, which it draws from OS randomness with the standard
deviation of the configuration it accepted at setup (``sigma C / sqrt(|S|)``), never from a
value the server sends per round.

A silo checks the server's first message against that configuration: the session's parameters
must be :func:`~fedprivacy.uldp.deployment.session_parameters` of it (same users, silos, model
size, clip, noise bound, key size), so that a server cannot lower the noise bound, shrink the
key or change the sub-sampling mode behind the silos' backs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fedprivacy.flower.node import StageHandler, single_threaded
from fedprivacy.flower.stages import Record, Stage, decode_array, field
from fedprivacy.policy import PartyPolicy
from fedprivacy.uldp.private_weighting.errors import MalformedMessageError, OutOfOrderError
from fedprivacy.uldp.private_weighting.messages import encode_message
from fedprivacy.uldp.private_weighting.params import PrivateWeightingParameters
from fedprivacy.uldp.private_weighting.silo import PrivateWeightingSilo
from fedprivacy.uldp.private_weighting.state import (
    decode_params,
    dump_silo,
    encode_params,
    load_silo,
)

__all__ = ["SiloNode"]


@dataclass
class SiloNode(StageHandler):
    """One silo's node.

    Parameters
    ----------
    silo : int
        The silo this node is (its ``fedprivacy-silo`` node configuration).
    fault : str
        Fault injection: ``"replay@R"`` makes the silo send, in round ``R``, its reply of the
        previous stage again (the server must refuse it with the protocol's typed error).
    data_dir : str, optional
        The silo's data directory (its ``data-dir`` node configuration; default
        ``$FEDPRIVACY_DATA``).
    """

    silo: int
    fault: str = ""
    data_dir: str | None = None
    policy: PartyPolicy = dataclasses.field(default_factory=PartyPolicy)

    def _hello(self, request: Record, state: dict[str, bytes]) -> Record:
        return {"user": self.silo}

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

    # ------------------------------------------------------------------ setup
    def _key(self, request: Record, state: dict[str, bytes]) -> Record:
        from fedprivacy.uldp.deployment import session_parameters, silo_side

        config = field(request, "config", str)
        side = silo_side(config, self.data_dir)
        params = decode_params(field(request, "params", bytes))
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
        reply = encode_message(silo.on_paillier_key(field(request, "message", bytes)))
        state.clear()
        state.update(config=config.encode(), params=encode_params(params))
        return self._keep(state, silo, reply)

    def _roster(self, request: Record, state: dict[str, bytes]) -> Record:
        _, silo = self._restore(state)
        shares = silo.on_roster(field(request, "message", bytes))
        return self._keep(state, silo, b"" if shares is None else encode_message(shares))

    def _seed(self, request: Record, state: dict[str, bytes]) -> Record:
        _, silo = self._restore(state)
        silo.on_seed_delivery(field(request, "message", bytes))
        return self._keep(state, silo, encode_message(silo.blinded_histogram()))

    # ------------------------------------------------------------------ rounds
    def _round(self, request: Record, state: dict[str, bytes]) -> Record:
        from fedprivacy.uldp.deployment import silo_deltas, silo_noise_std, silo_side

        params, silo = self._restore(state)
        r = field(request, "round", int)
        if self.fault == f"replay@{r}":
            return {"message": state["last"]}
        side = silo_side(state["config"].decode(), self.data_dir)
        model = decode_array(field(request, "model", bytes), np.float32)
        if model.size != params.n_params:
            raise MalformedMessageError(
                f"the model has {model.size} parameters, the session {params.n_params}"
            )
        keys = field(request, "keys", int)
        with single_threaded():
            deltas = silo_deltas(side, self.silo, model, keys)
        update = silo.on_weights(
            field(request, "message", bytes), deltas, silo_noise_std(side.config)
        )
        return self._keep(state, silo, encode_message(update))


SiloNode.handlers = {
    Stage.HELLO: SiloNode._hello,
    Stage.SILO_KEY: SiloNode._key,
    Stage.SILO_ROSTER: SiloNode._roster,
    Stage.SILO_SEED: SiloNode._seed,
    Stage.SILO_ROUND: SiloNode._round,
}
