"""A finished training run: its records, its privacy report and its summary."""

from __future__ import annotations

import functools
import math
import platform
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedprivacy.fl.engine import FederatedTraining, summarise_records
from fedprivacy.fl.noise_check import swamped
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.models.registry import build_model, count_parameters
from fedprivacy.participation.curve import TWeakCurve
from fedprivacy.participation.guard import PrivacyGuard, guard_summary
from fedprivacy.participation.metrics import t_strong
from fedprivacy.participation.privacy_filter import PrivacyFilter, filter_summary
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.report import LedgerEpsilons, PrivacyReport, privacy_report
from fedprivacy.report_inputs import hidden_selection
from fedprivacy.report_sentences import aggregation_of

__all__ = ["TrainingResult"]


@dataclass
class TrainingResult:
    """A finished (or resumed and finished) run."""

    config: TrainConfig
    training: FederatedTraining
    curve: TWeakCurve | None
    seconds: float
    exposed: list[int] = field(default_factory=list)

    @property
    def records(self) -> list[RoundRecord]:
        """Per-round records."""
        return self.training.records

    @functools.cached_property
    def report(self) -> PrivacyReport:
        """The run's privacy report (server's view and released models), computed once."""
        tr = self.training
        curve = self.curve
        available = not isinstance(self.config.dropout, str) and float(self.config.dropout) == 0
        hidden = hidden_selection(tr.selector, self.config.fairness, available)
        dp = tr.mechanism.noise_multiplier is not None
        k = self.config.per_round
        noise = swamped(tr.mechanism, dimension=count_parameters(tr.model), per_round=k)
        return privacy_report(
            tr.mechanism,
            self.config.target_delta,
            LedgerEpsilons(
                tr.ledger.matrix().astype(bool),
                round_noise=np.array([r.noise_multiplier for r in tr.records], dtype=np.float64),
                wrap_log_probability=np.array(
                    [r.wrap_log_probability for r in tr.records], dtype=np.float64
                ),
                sampling_rate=hidden.sampling_rate,
                batches=hidden.batches,
                users=self.config.users,
            ),
            aggregation=aggregation_of(self.config.secagg, tr.authenticated),
            server_view=None
            if curve is None
            else {
                "t_weak": curve.final,
                "t_strong": t_strong(tr.users_ledger.matrix()),
                "exposed_users": len(self.exposed),
            },
            caveats=(hidden.caveat, *noise) if dp else (),
        )

    def _epsilon_hat(self) -> dict[str, float] | None:
        """The canaries' estimate (:mod:`fedprivacy.fl.canary_users`); None without canaries."""
        tr, c = self.training, self.config
        if tr.canaries is None:
            return None
        data = tr.dataset
        model = build_model(c.model_name, data.input_shape, data.num_classes, seed=c.seed)
        change = (tr.global_flat.detach().cpu() - flatten_parameters(model)).numpy()
        return tr.canaries.estimate(change, c.target_delta, seed=c.seed).fields()

    def summary(self) -> dict[str, Any]:
        """The ``--json`` output and ``summary.json``."""
        tr = self.training
        base = summarise_records(tr.records)
        card = tr.users_ledger.cardinalities  # the canaries are no user's
        freq = tr.users_ledger.frequency
        rounds = tr.ledger.rounds
        final = None if self.curve is None else self.curve.final
        out: dict[str, Any] = {
            "dataset": self.config.dataset,
            "data_source": tr.dataset.source,
            "model": self.config.model_name,
            "parameters": count_parameters(tr.model),
            "partition": self.config.partition,
            "scheme": self.config.label,
            "users": self.config.users,
            "per_round": self.config.per_round,
            "rounds": rounds,
            "seed": self.config.seed,
            "aggregation": "secagg" if self.config.secagg else "plaintext",
            "encoding": self.config.encoding,
            "device": tr.device_name,
            "test_accuracy": base["test_accuracy"],
            "test_loss": base["test_loss"],
            "privacy": self.report.to_dict(),
            "t_weak": None if final is None else final.upper,
            "t_weak_lower": None if final is None else final.lower,
            "t_weak_exact": None if final is None else final.exact,
            "exposed_users": len(self.exposed) if self.curve is not None else None,
            "fairness_gap": float((freq.max() - freq.min()) / rounds) if rounds else 0.0,
            "average_cardinality": float(card.mean()) if rounds else 0.0,
            "skipped_rounds": int(np.count_nonzero(card == 0)),
            "aborted_rounds": sum(1 for r in tr.records if r.aborted),
            "clipped_entries": int(sum(r.get("clipped_entries") for r in tr.records)),
            "mean_train_seconds": base["mean_train_seconds"],
            "mean_aggregate_seconds": base["mean_aggregate_seconds"],
            "seconds": self.seconds,
            **self._guard(),
            "epsilon_hat": self._epsilon_hat(),
            "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}

    def _guard(self) -> dict[str, Any]:
        """``{"guard": ...}`` and ``{"privacy_filter": ...}`` of a run with them.

        The guard's decisions are those since this process started.
        """
        out: dict[str, Any] = {}
        selector: object = self.training.selector
        while selector is not None:
            if isinstance(selector, PrivacyGuard):
                out["guard"] = guard_summary(selector)
            if isinstance(selector, PrivacyFilter):
                out["privacy_filter"] = filter_summary(selector)
            selector = getattr(selector, "selector", None)
        return out

    @property
    def privacy_filter(self) -> PrivacyFilter | None:
        """The run's privacy filter (``epsilon_budget``), if any."""
        selector: object = self.training.selector
        while selector is not None and not isinstance(selector, PrivacyFilter):
            selector = getattr(selector, "selector", None)
        return selector if isinstance(selector, PrivacyFilter) else None
