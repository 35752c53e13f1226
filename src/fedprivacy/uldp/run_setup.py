"""One setup for in-process and deployed ULDP-FL runs: seeds, data, allocation, initial model.

:func:`fedprivacy.uldp.run.run_uldp` and the deployment's silos and server
(:mod:`fedprivacy.uldp.deployment`, :mod:`fedprivacy.flower.uldp.cross_silo`) build their data and
first model here, from the configuration alone, so the two cannot drift apart: the seeds of a run
are :func:`run_seeds`, the records go to users and silos by :func:`allocate` with the first of
them, and ``x_0`` is :func:`initial_model` with the second.

Examples
--------
>>> cfg = UldpConfig(dataset="creditcard-synthetic", method="ULDP-AVG", users=6).resolved()
>>> [len(s.generate_state(1)) for s in run_seeds(cfg)]
[1, 1, 1, 1]
>>> round_hyper(cfg).local.epochs == cfg.local_epochs
True
"""

from __future__ import annotations

import numpy as np
import torch

from fedprivacy.data.allocation import Allocation
from fedprivacy.data.allocators import allocate_pool
from fedprivacy.data.fixed_silos import allocate_fixed_silos
from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.participation.sampling import PoissonSampler
from fedprivacy.participation.selectors import make_selector
from fedprivacy.report_inputs import Hidden, hidden_selection
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.rounds import RoundHyper
from fedprivacy.uldp.tasks import TaskSpec, task_for

__all__ = [
    "allocate",
    "initial_model",
    "load_dataset",
    "round_hyper",
    "run_seeds",
    "sample_hidden",
    "uldp_hidden",
]


def run_seeds(cfg: UldpConfig) -> list[np.random.SeedSequence]:
    """The run's allocation, initialisation, training and noise seeds (in this order)."""
    return np.random.SeedSequence(cfg.seed).spawn(4)


def load_dataset(cfg: UldpConfig) -> SiloDataset:
    """The dataset of a configuration (``data_dir``, ``seed``, ``creditcard_path``)."""
    return load_silo_dataset(
        cfg.dataset, cfg.data_dir, seed=cfg.seed, creditcard_path=cfg.creditcard_path
    )


def allocate(config: UldpConfig, dataset: SiloDataset, rng: np.random.Generator) -> Allocation:
    """Allocate the dataset's training records to the config's users (and silos).

    Heart Disease and TCGA-BRCA keep their silos (:func:`allocate_fixed_silos`, at least two
    records per user and silo for TCGA-BRCA's Cox loss); MNIST and Creditcard get
    :func:`allocate_pool` with ``config.num_silos`` silos.
    """
    if dataset.fixed_silos:
        return allocate_fixed_silos(
            dataset.train_sizes(),
            config.users,
            config.distribution,
            rng,
            user_alpha=config.user_alpha,
            main_silo_share=config.main_silo_share,
            min_records_per_user_silo=2 if dataset.task == "survival" else 1,
        )
    _, labels = dataset.pooled_train()
    return allocate_pool(
        labels,
        config.users,
        config.num_silos,
        config.distribution,
        rng,
        user_alpha=config.user_alpha,
        silo_alpha=config.silo_alpha,
        max_labels_per_user=config.max_labels_per_user,
    )


def round_hyper(cfg: UldpConfig) -> RoundHyper:
    """The round hyper-parameters of a resolved configuration."""
    assert cfg.clip is not None and cfg.global_lr is not None and cfg.local_lr is not None
    assert cfg.local_epochs is not None and cfg.batch_size is not None
    return RoundHyper(
        local=LocalTrainingSpec(
            epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.local_lr
        ),
        global_lr=cfg.global_lr,
        clip=cfg.clip,
        noise_multiplier=cfg.noise_multiplier,
        sampling_rate=cfg.effective_sampling_rate,
        naive_noise="paper" if cfg.naive_noise == "paper" else "corrected",
    )


def initial_model(
    cfg: UldpConfig, ds: SiloDataset
) -> tuple[TaskSpec, torch.nn.Module, torch.Tensor]:
    """The task, the architecture and ``x_0`` of a run, in-process or deployed.

    Uses the dataset only for its shape; no allocation is made.
    """
    task = task_for(ds.name, ds.task, ds.num_features, ds.num_classes)
    model = task.build_model(seed=int(run_seeds(cfg)[1].generate_state(1)[0]))
    return task, model, flatten_parameters(model).detach().clone()


def sample_hidden(cfg: UldpConfig) -> bool:
    """Whether a ``-s`` method's user sample is hidden from whoever sees the released models.

    Poisson sampling at ``q`` (the paper, ``scheme = "poisson"``) comes from randomness nobody
    publishes: the models' observers get its amplification. A selection scheme (``random``,
    ``multiround``, ...) is run and known by the server: no amplification is claimed for anyone
    (:class:`~fedprivacy.uldp.accounting.GaussianRounds`' ``amplified``). The one rule for the
    in-process run, the deployed server and the reports.

    Examples
    --------
    >>> sample_hidden(UldpConfig()), sample_hidden(UldpConfig(scheme="multiround"))
    (True, False)
    """
    return cfg.scheme == PoissonSampler.name


def uldp_hidden(cfg: UldpConfig) -> Hidden:
    """What a run's user selection hides from whoever sees only the released models.

    A hidden Poisson sample at ``q`` (:func:`sample_hidden`); under a selection scheme, what
    it hides as in every run (:func:`~fedprivacy.report_inputs.hidden_selection`: the batches of
    Multi-RoundSecAgg, ``K`` of ``|U|`` uniformly under random selection; every user is always
    available); nothing when every user takes part in every round.

    Examples
    --------
    >>> uldp_hidden(UldpConfig(method="ULDP-AVG-s", sampling_rate=0.2)).sampling_rate
    0.2
    >>> uldp_hidden(UldpConfig(method="ULDP-AVG-s", scheme="multiround", per_round=10,
    ...                        target_privacy=5)).batches.shape
    (20, 5)
    >>> uldp_hidden(UldpConfig(method="ULDP-AVG")).why
    'every user takes part in every round'
    """
    if not method_spec(cfg.method).sampled:
        return Hidden(why="every user takes part in every round")
    if sample_hidden(cfg):
        return Hidden(sampling_rate=cfg.effective_sampling_rate)
    selector = make_selector(cfg.scheme, cfg.users, cfg.effective_per_round, cfg.target_privacy)
    return hidden_selection(selector, False, everyone_available=True)
