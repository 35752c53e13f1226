"""The server's side of cross-silo ULDP-FL on a transport: Protocol 1's setup and rounds.

:class:`ProtocolSilos` is the :class:`~fedprivacy.uldp.algorithm.SiloRounds` of a deployment:
the same :class:`~fedprivacy.uldp.algorithm.UldpAlgorithm` as in process runs the round, and
only where the silos compute differs. Each round is one exchange (``silo-round``: the model, the
round's minibatch seed and ``Enc(B_inv(N_u))``; the masked, encrypted, noised weighted sums
back); the aggregate goes through the family's
:meth:`~fedprivacy.uldp.families.UserLevelFamily.server_update` and is accounted, with the
loop's ledger, by a :class:`~fedprivacy.uldp.accounting.GaussianRounds`. :func:`setup_session`
is Protocol 1's setup (``silo-key``, ``silo-roster``, ``silo-seed``).

A silo that does not answer a round, or whose reply the protocol refuses (replayed, out of
order, malformed: the typed errors of :mod:`fedprivacy.secagg.private_weighting.errors`), aborts
the round: Protocol 1 needs every silo's masks to cancel, and the server learns nothing from a
partial product. So do well-formed but wrong ciphertexts, seen only when the aggregate decrypts
out of range (an ``aggregate_rejected`` event; the server cannot tell whose they were). Nothing
is released, nobody is charged, and the model stays as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.errors import FedPrivacyError
from fedprivacy.flower.faults.silo_forge import SiloForge
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.stages import Record, Stage, encode_array
from fedprivacy.secagg.private_weighting.errors import (
    AggregateOutOfRangeError,
    PrivateWeightingError,
    UnknownSenderError,
)
from fedprivacy.secagg.private_weighting.messages import decode_message, encode_message
from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters
from fedprivacy.secagg.private_weighting.server import PrivateWeightingServer
from fedprivacy.secagg.private_weighting.state import encode_params
from fedprivacy.uldp.accounting import GaussianRounds
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.families import FAMILIES, UserLevelFamily
from fedprivacy.uldp.families.user_level import global_step
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.rounds import RoundOutput
from fedprivacy.uldp.run_setup import sample_hidden

__all__ = ["Aggregates", "ProtocolSilos", "SetupError", "setup_session"]

#: Per aggregated round: the decoded aggregate, the minibatch seed and the user sample.
Aggregates = dict[int, tuple[NDArray[np.float64], int, NDArray[np.bool_]]]


class SetupError(FedPrivacyError):
    """Protocol 1's setup could not complete (a silo did not answer or was refused)."""


def _receive(
    server: PrivateWeightingServer,
    exchange: StageExchange,
    r: int,
    stage: Stage,
    requests: Mapping[int, Record],
    replies: Mapping[int, Record],
) -> list[int]:
    """Hand each silo's protocol message to the server; the silos that failed the stage.

    Those asked that did not reply (ascending), then those whose reply was refused.
    """
    refused = []
    for silo, reply in sorted(replies.items()):
        data = reply.get("message")
        if data == b"":
            continue  # silo != 0 has no seed shares to send
        try:
            if not isinstance(data, bytes):
                raise UnknownSenderError("the reply carries no protocol message")
            message = decode_message(data)
            if message.header.sender != silo:
                raise UnknownSenderError(f"the node of silo {silo} sent another silo's message")
            server.receive(message)
        except PrivateWeightingError as exc:
            exchange.reject(r, stage, silo, exc)
            refused.append(silo)
    return sorted(set(requests) - set(replies)) + refused


def setup_session(
    cfg: UldpConfig,
    server: PrivateWeightingServer,
    exchange: StageExchange,
    config_toml: str,
    params: PrivateWeightingParameters | None = None,
) -> dict[str, float]:
    """Run Protocol 1's setup over ``exchange``; seconds per exchange.

    ``config_toml`` and ``params`` (default: the server's) are what the silos are proposed;
    each silo checks them against its own policy.

    Raises
    ------
    SetupError
        If a silo does not answer a setup stage or its reply is refused.
    """
    silos = list(range(cfg.num_silos))
    seconds: dict[str, float] = {}

    def step(stage: Stage, requests: dict[int, Record]) -> None:
        started = time.perf_counter()
        replies = exchange(stage, 0, requests)
        missing = _receive(server, exchange, 0, stage, requests, replies)
        seconds[stage.value] = time.perf_counter() - started
        if missing:
            why = [
                f"silo {e['user']}: {e.get('error', 'no reply')} {e.get('detail', '')}".strip()
                for e in exchange.events
                if e.get("stage") == stage.value and e.get("user") in missing
            ]
            raise SetupError(
                f"silos {missing} did not complete the {stage.value} stage: " + "; ".join(why)
            )

    keys = server.start_setup()
    wire = encode_params(server.params if params is None else params)
    step(
        Stage.SILO_KEY,
        {
            s: {"config": config_toml, "params": wire, "message": encode_message(keys[s])}
            for s in silos
        },
    )
    step(Stage.SILO_ROSTER, _messages(server.finish_keys()))
    step(Stage.SILO_SEED, _messages(server.finish_seed()))
    server.finish_histograms()
    return seconds


def _messages(messages: Mapping[int, Any]) -> dict[int, Record]:
    return {s: {"message": encode_message(m)} for s, m in messages.items()}


class ProtocolSilos:
    """The silos of a deployment, reached over ``exchange``; Protocol 1 sums their updates.

    Parameters
    ----------
    cfg : UldpConfig
        The resolved configuration (:func:`~fedprivacy.uldp.deployment.check_deployable`).
    server : PrivateWeightingServer
        The server's side of Protocol 1, set up.
    exchange : StageExchange
        Reaches the silos.
    rng : numpy.random.Generator
        Draws each round's minibatch seed (after the selector's draw).
    noise_multiplier : float or None
        The effective noise multiplier of the silos' summed discrete Gaussians (accounted).
    forge : SiloForge, optional
        A lying server (fault injection): ``round=R`` asks round ``R`` again in a new session.
    session : callable, optional
        ``session()`` sets up a new Protocol 1 session and returns its server (``round=R``).

    Attributes
    ----------
    accounting : GaussianRounds
        How the released rounds and the ledger translate into epsilons (the silos keep their
        own budget).
    aggregates : dict
        Per aggregated round: the decoded aggregate, the minibatch seed and the user sample.
    aborted : str
        Why the last round was aborted (empty if it was released).
    selected : numpy.ndarray
        The last round's selected users.
    """

    def __init__(
        self,
        cfg: UldpConfig,
        server: PrivateWeightingServer,
        exchange: StageExchange,
        rng: np.random.Generator,
        noise_multiplier: float | None,
        *,
        forge: SiloForge | None = None,
        session: Callable[[], PrivateWeightingServer] | None = None,
    ) -> None:
        self.cfg = cfg
        self.server = server
        self.exchange = exchange
        self.rng = rng
        self.forge = forge or SiloForge()
        self.session = session
        self._kept: tuple[int, bytes, int, NDArray[np.bool_]] | None = None
        self.spec = method_spec(cfg.method)
        family = FAMILIES[self.spec.family]
        assert isinstance(family, UserLevelFamily)
        self.family = family
        self.accounting = GaussianRounds(
            noise_multiplier,
            cfg.effective_sampling_rate,
            cfg.delta,
            amplified=self.spec.sampled and sample_hidden(cfg),
        )
        self.aggregates: Aggregates = {}
        self.aborted = ""
        self.selected = np.zeros(0, dtype=np.intp)

    def _ask(
        self, r: int, flat: torch.Tensor, sampled: NDArray[np.bool_]
    ) -> tuple[int, bytes, int, NDArray[np.bool_]]:
        """Round ``r``'s request: its index, the model, a fresh minibatch seed, the sample.

        Under the ``round=R`` forge, the round after ``R`` is round ``R`` again in a new session.
        """
        keys = int(self.rng.integers(2**62))
        model = encode_array(flat.detach().cpu().numpy().astype(np.float32))
        ask = (r, model, keys, sampled)
        if self.forge.round_index == r:
            self._kept = ask
        if self.forge.repeats(r) and self._kept is not None and self.session is not None:
            self.server = self.session()  # fresh keys and masks: only the index repeats
            ask = self._kept
        return ask

    def _close(self, r: int, missing: list[int]) -> NDArray[np.float64] | None:
        """The round's aggregate, or ``None`` with :attr:`aborted` saying why (no output)."""
        if missing:
            self.server.abort_round()
            self.aborted = f"silos {missing} missing or refused"
            return None
        try:
            return self.server.finish_round()
        except AggregateOutOfRangeError as exc:
            self.exchange.log(
                round=r,
                stage=Stage.SILO_ROUND.value,
                event="aggregate_rejected",
                error=type(exc).__name__,
                detail=str(exc),
            )
            self.aborted = "the decrypted aggregate is out of range: a silo sent wrong ciphertexts"
            return None

    def round(
        self, flat: torch.Tensor, sampled: NDArray[np.bool_] | None, round_index: int
    ) -> RoundOutput | None:
        """The silos train and weight their users' updates; Protocol 1 sums them."""
        r = round_index + 1  # Protocol 1's rounds start at 1 (0 is the setup)
        self.aborted = ""
        mask = np.ones(self.cfg.users, dtype=np.bool_) if sampled is None else sampled
        self.selected = np.flatnonzero(mask)
        index, model, keys, asked = self._ask(r, flat, mask)
        weights = self.server.start_round(index, asked if self.spec.sampled else None)
        requests = {
            s: {"round": index, "model": model, "keys": keys, "message": encode_message(m)}
            for s, m in weights.items()
        }
        replies = self.exchange(Stage.SILO_ROUND, r, requests)
        missing = _receive(self.server, self.exchange, r, Stage.SILO_ROUND, requests, replies)
        aggregate = self._close(r, missing)
        if aggregate is None:
            return None
        cfg = self.cfg
        assert cfg.global_lr is not None
        step = global_step(cfg.global_lr, cfg.effective_sampling_rate, cfg.users, cfg.num_silos)
        total = torch.from_numpy(aggregate).to(flat.dtype)
        self.aggregates[round_index] = (aggregate, keys, asked)
        new = self.family.server_update(flat, total, step)
        return RoundOutput(new, total, total, asked if self.spec.sampled else None)
