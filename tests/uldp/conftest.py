from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from fedprivacy.data.tabular import SiloDataset, load_silo_dataset
from fedprivacy.uldp.allocators import allocate_fixed_silos
from fedprivacy.uldp.federation import Federation, build_federation

DATA = Path(
    os.environ.get("FEDPRIVACY_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


#: The test modules of the ULDP-FL methods (the fixtures below are theirs).
_METHOD_TESTS = {
    "test_algorithm.py",
    "test_config.py",
    "test_federation.py",
    "test_group_dp.py",
    "test_methods.py",
    "test_metrics.py",
    "test_per_user_training.py",
    "test_run.py",
    "test_sensitivity.py",
    "test_tasks.py",
}


@pytest.fixture(autouse=True)
def _one_torch_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """Small per-user batches run fastest on one thread (on a shared CPU, many times faster)."""
    if Path(str(request.path)).name not in _METHOD_TESTS:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "heart_disease").is_dir():
        pytest.skip(f"needs the shared datasets in {DATA} (set FEDPRIVACY_DATA)")
    return DATA


@pytest.fixture(scope="session")
def heart(data_dir: Path) -> SiloDataset:
    return load_silo_dataset("heart_disease", data_dir)


@pytest.fixture(scope="session")
def tcga(data_dir: Path) -> SiloDataset:
    return load_silo_dataset("tcga_brca", data_dir)


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
def federation_of():  # type: ignore[no-untyped-def]
    """The factory ``make_federation(dataset, users, dist="uniform", seed=0)``."""
    return make_federation
