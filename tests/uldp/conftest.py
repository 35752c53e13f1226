from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from fedprivacy.data.creditcard import SYNTHETIC_MARK, synthetic_creditcard
from fedprivacy.data.fixed_silos import allocate_fixed_silos
from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.families import FAMILIES, UserLevelFamily
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.rounds import RoundHyper

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    return DATA


#: Fed-Heart-Disease's silos and their train / test sizes (FLamby), copied by the stand-in.
HEART_SILOS = ("cleveland", "hungarian", "switzerland", "va")
HEART_TRAIN = (199, 172, 30, 85)
HEART_TEST = (104, 89, 16, 45)


def synthetic_heart(seed: int = 0) -> SiloDataset:
    """A stand-in with Fed-Heart-Disease's shape, made from the package's synthetic generator.

    The records are rows of :func:`fedprivacy.data.creditcard.synthetic_creditcard` (the
    stand-in that ships with the package; its frauds are shifted along a fixed direction, so a
    logistic regression has something to learn): ``V1..V13`` as the 13 features and the fraud
    flag as the binary label, cut into Fed-Heart-Disease's four silos and train / test sizes
    and standardised per silo, as FLamby standardises each centre. Named ``heart_disease`` so
    that it gets that dataset's task (a 14-parameter logistic regression) and hyperparameters;
    its ``source`` says ``synthetic stand-in``. For the tests about the methods' arithmetic
    (they hold on any data), never for numbers about the real dataset.
    """
    sizes = list(zip(HEART_TRAIN, HEART_TEST, strict=True))
    n = sum(a + b for a, b in sizes)
    table = synthetic_creditcard(n, seed, fraud_rate=0.45)
    order = np.random.default_rng(seed).permutation(n)  # the generator sorts by Time only
    x_all = np.asarray(table.features[order, 1:14], dtype=np.float64)
    y_all = np.asarray(table.labels[order], dtype=np.int64)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("tx", "ty", "vx", "vy")}
    start = 0
    for n_train, n_test in sizes:
        x = x_all[start : start + n_train + n_test]
        y = y_all[start : start + n_train + n_test]
        start += n_train + n_test
        x = (x - x[:n_train].mean(axis=0)) / x[:n_train].std(axis=0)
        for key, arr in (
            ("tx", x[:n_train].astype(np.float32)),
            ("ty", y[:n_train].copy()),
            ("vx", x[n_train:].astype(np.float32)),
            ("vy", y[n_train:].copy()),
        ):
            arr.flags.writeable = False
            parts[key].append(arr)
    return SiloDataset(
        name="heart_disease",
        source=f"{SYNTHETIC_MARK} shaped as Fed-Heart-Disease (tests only) from: {table.source}",
        task="binary",
        silo_names=HEART_SILOS,
        train_x=tuple(parts["tx"]),
        train_y=tuple(parts["ty"]),
        test_x=tuple(parts["vx"]),
        test_y=tuple(parts["vy"]),
        feature_names=tuple(f"V{i}" for i in range(1, 14)),
        num_classes=2,
        fixed_silos=True,
    )


@pytest.fixture(scope="session")
def heart_synthetic() -> SiloDataset:
    """The Fed-Heart-Disease-shaped synthetic stand-in (always; see :func:`synthetic_heart`)."""
    return synthetic_heart()


@pytest.fixture(scope="session")
def heart(heart_synthetic: SiloDataset) -> SiloDataset:
    """Fed-Heart-Disease, or its synthetic stand-in when the shared datasets are absent.

    The tests on it check the methods' arithmetic (vectorised rounds against per-user loops,
    sensitivities, noise scales, accounting), which holds on any data: on a clean checkout
    they run on the stand-in rather than skip.
    """
    if (DATA / "heart_disease").is_dir():
        return load_silo_dataset("heart_disease", DATA)
    return heart_synthetic


#: Fed-TCGA-BRCA's regions and their train / test sizes (FLamby), copied by its stand-in.
TCGA_SILOS = ("Northeast", "South", "West", "Midwest", "Europe", "Canada")
TCGA_TRAIN = (248, 156, 164, 129, 129, 40)
TCGA_TEST = (63, 40, 42, 33, 33, 11)


def synthetic_tcga(seed: int = 0) -> SiloDataset:
    """A stand-in with Fed-TCGA-BRCA's shape: 6 silos, 39 features, ``(E, T)`` targets.

    Gaussian features; the time ``T`` is exponential with a log-hazard linear in the features
    (a Cox model fits it), and ``E = 1`` for about a third of the records (censoring). Named
    ``tcga_brca`` for that dataset's task (Cox regression); ``source`` says ``synthetic
    stand-in``. For the tests that do not depend on the real records.
    """
    rng = np.random.default_rng(seed)
    beta = rng.normal(0.0, 0.3, size=39)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("tx", "ty", "vx", "vy")}
    for n_train, n_test in zip(TCGA_TRAIN, TCGA_TEST, strict=True):
        for kx, ky, n in (("tx", "ty", n_train), ("vx", "vy", n_test)):
            x = rng.normal(0.0, 1.0, size=(n, 39)).astype(np.float32)
            t = rng.exponential(1000.0 * np.exp(-(x @ beta)))
            e = (rng.random(n) < 1 / 3).astype(np.float32)
            y = np.column_stack([e, np.maximum(t, 1.0)]).astype(np.float32)
            for key, arr in ((kx, x), (ky, y)):
                arr.flags.writeable = False
                parts[key].append(arr)
    return SiloDataset(
        name="tcga_brca",
        source=f"{SYNTHETIC_MARK} shaped as Fed-TCGA-BRCA (tests only, seed={seed})",
        task="survival",
        silo_names=TCGA_SILOS,
        train_x=tuple(parts["tx"]),
        train_y=tuple(parts["ty"]),
        test_x=tuple(parts["vx"]),
        test_y=tuple(parts["vy"]),
        feature_names=tuple(f"x{i}" for i in range(39)),
        num_classes=0,
        fixed_silos=True,
    )


@pytest.fixture(scope="session")
def tcga_synthetic() -> SiloDataset:
    """The Fed-TCGA-BRCA-shaped synthetic stand-in (always; see :func:`synthetic_tcga`)."""
    return synthetic_tcga()


@pytest.fixture(scope="session")
def tcga(tcga_synthetic: SiloDataset) -> SiloDataset:
    """Fed-TCGA-BRCA, or its synthetic stand-in when the shared datasets are absent."""
    if (DATA / "tcga_brca").is_dir():
        return load_silo_dataset("tcga_brca", DATA)
    return tcga_synthetic


def make_federation(
    ds: SiloDataset, users: int, dist: str = "uniform", seed: int = 0
) -> Federation:
    m = 2 if ds.task == "survival" else 1
    alloc = allocate_fixed_silos(
        ds.train_sizes(), users, dist, np.random.default_rng(seed), min_records_per_user_silo=m
    )
    return build_federation(ds, alloc)


@pytest.fixture(scope="session")
def heart_fed(heart: SiloDataset) -> Federation:
    return make_federation(heart, 30)


@pytest.fixture(scope="session")
def heart_fed_zipf(heart: SiloDataset) -> Federation:
    return make_federation(heart, 20, "zipf")


@pytest.fixture(scope="session")
def heart_synthetic_fed(heart_synthetic: SiloDataset) -> Federation:
    """:func:`heart_fed`'s federation (30 users, uniform) on the synthetic stand-in, always."""
    return make_federation(heart_synthetic, 30)


@pytest.fixture(scope="session")
def federation_of():  # type: ignore[no-untyped-def]
    """The factory ``make_federation(dataset, users, dist="uniform", seed=0)``."""
    return make_federation


# --------------------------------------------------------------------------- the loop oracle


def reference_presum(
    method: str,
    fed: Federation,
    global_flat: torch.Tensor,
    hyper: RoundHyper,
    rng: np.random.Generator,
    *,
    model: nn.Module | None = None,
) -> torch.Tensor:
    """The pre-noise aggregate of a ULDP-AVG / ULDP-SGD round, computed with per-user loops.

    Draws the same randomness as :meth:`MethodRunner.run_round
    <fedprivacy.uldp.methods.MethodRunner.run_round>` (sample, then keys) and, in every silo,
    trains each user with :func:`~fedprivacy.fl.training_loops.train_groups_loop` (a model
    copy and an optimiser per user, the authors' way) or takes its gradient with
    :func:`~fedprivacy.fl.training_loops.group_gradients_loop`, then clips, weights and
    sums in float64.

    Returns
    -------
    torch.Tensor
        Float32 ``(P,)``.

    Raises
    ------
    ParameterError
        For other methods.
    """
    spec = method_spec(method)
    family = FAMILIES[spec.family]
    if not isinstance(family, UserLevelFamily):
        raise ParameterError("method", "reference_presum covers ULDP-AVG and ULDP-SGD only")
    arch = model if model is not None else fed.task.build_model()
    loss = fed.task.loss
    h = hyper
    q = h.sampling_rate if spec.sampled else 1.0
    sampled = rng.random(fed.num_users) < q if spec.sampled else None
    keys = family.draw_keys(h, fed, rng)
    weights = fed.weights(spec.weighted)
    if sampled is not None:
        weights = weights * sampled[None, :]
    total = torch.zeros(global_flat.numel(), dtype=torch.float64)
    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        x, y = fed.x[sl].cpu(), fed.y[sl].cpu()
        off, users = fed.user_offsets[silo], fed.silo_users[silo]
        g0 = global_flat.cpu()
        silo_keys = None if keys is None else keys[:, fed.record_index[sl]]
        vectors = family.loop_vectors(arch, loss, g0, (x, y, off), silo_keys, h.local)
        for j, u in enumerate(users):
            w = float(weights[silo, u])
            if w == 0:
                continue
            v = vectors[j].to(torch.float64)
            norm = float(torch.linalg.vector_norm(v))
            factor = h.clip / norm if norm > h.clip else 1.0
            total += w * factor * v
    return total.to(torch.float32)


@pytest.fixture
def presum_oracle() -> Callable[..., torch.Tensor]:
    """:func:`reference_presum`: a ULDP-AVG / ULDP-SGD round's pre-noise sum, per-user loops."""
    return reference_presum
