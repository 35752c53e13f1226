"""Cross-silo datasets by name: :func:`load_silo_dataset` and the :data:`SILO_LOADERS` registry.

Fixed silos (FLamby's Fed-Heart-Disease and Fed-TCGA-BRCA) or one pool of records (MNIST,
Creditcard), each loaded as a :class:`~fedprivacy.data.silo_dataset.SiloDataset` (that module
describes the two kinds, the training pool and the targets).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from fedprivacy._registry import Registry
from fedprivacy.data.silo_dataset import POOL_NAME, SiloDataset


def load_mnist_pool(data_dir: str | os.PathLike[str] | None = None) -> SiloDataset:
    """Load MNIST as one pool of records (an allocation then makes the silos).

    Reuses :func:`fedprivacy.data.images.load_dataset` (checksums verified, pixels normalised
    as ``(x / 255 - 0.1307) / 0.3081``) without copying its arrays. The pool is the official
    60,000 training images and the test set the official 10,000 test images. The authors'
    code instead concatenates both and re-splits them (stratified, the same 60K/10K sizes) with
    the run's seed; we keep the official split, which has the same sizes and class balance.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``mnist/``; ``None`` uses ``$FEDPRIVACY_DATA``.

    Returns
    -------
    SiloDataset
        ``task="multiclass"``, ``num_classes=10``, one pseudo-silo ``"pool"``, inputs
        ``(1, 28, 28)``.

    Raises
    ------
    DataNotFoundError
        If the directory or a file is missing.
    ChecksumError
        If a file is not the published version.
    """
    from fedprivacy.data.images import load_dataset

    ds = load_dataset("mnist", data_dir)
    return SiloDataset(
        name="mnist",
        source=ds.source,
        task="multiclass",
        silo_names=(POOL_NAME,),
        train_x=(ds.train_x,),
        train_y=(ds.train_y,),
        test_x=(ds.test_x,),
        test_y=(ds.test_y,),
        feature_names=(),
        num_classes=ds.num_classes,
        fixed_silos=False,
    )


def load_silo_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    creditcard_path: str | os.PathLike[str] | None = None,
) -> SiloDataset:
    """Load one of the ULDP-FL datasets by name.

    Parameters
    ----------
    name : {"heart_disease", "tcga_brca", "mnist", "creditcard", "creditcard-synthetic"}
        Which dataset: :func:`fedprivacy.data.heart_disease.load_heart_disease`,
        :func:`fedprivacy.data.tcga_brca.load_tcga_brca`, :func:`load_mnist_pool`,
        :func:`fedprivacy.data.creditcard.load_creditcard` (a user-supplied Kaggle file) or
        the generated stand-in :func:`fedprivacy.data.creditcard.synthetic_creditcard` (its
        ``source`` says ``synthetic stand-in``); or one added by ``SILO_LOADERS.register``.
    data_dir : str or os.PathLike or None
        Data directory; ``None`` uses ``$FEDPRIVACY_DATA``. Unused by the synthetic stand-in
        and when ``creditcard_path`` is given.
    seed : int
        Seed of the Creditcard train/test split and under-sampling (and of the stand-in).
    creditcard_path : str or os.PathLike or None
        Explicit path of ``creditcard.csv``, instead of ``<data_dir>/creditcard/creditcard.csv``.

    Returns
    -------
    SiloDataset
        The dataset.

    Raises
    ------
    ParameterError
        If ``name`` is not a name of :data:`SILO_LOADERS` (the message lists them).
    DataNotFoundError, ChecksumError
        If a file is missing or not the expected one.

    Examples
    --------
    >>> load_silo_dataset("creditcard-synthetic").silo_names
    ('pool',)
    >>> from fedprivacy.errors import ParameterError
    >>> try:
    ...     load_silo_dataset("cifar10")
    ... except ParameterError as exc:
    ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
    dataset: must be one of heart_disease, tcga_brca, mnist, creditcard, creditcard-synthetic;
    got 'cifar10'
    """
    load = SILO_LOADERS.lookup(name)
    return load(data_dir, seed, creditcard_path)


#: Loads a dataset from ``(data_dir, seed, creditcard_path)`` (see :func:`load_silo_dataset`).
SiloLoader = Callable[
    [str | os.PathLike[str] | None, int, str | os.PathLike[str] | None], SiloDataset
]

#: The loader of every dataset name accepted by :func:`load_silo_dataset`.
SILO_LOADERS: Registry[SiloLoader] = Registry("dataset")


# The FLamby and Creditcard modules import this one: their loaders are imported when called.
def _heart_disease(
    data_dir: str | os.PathLike[str] | None, seed: int, path: str | os.PathLike[str] | None
) -> SiloDataset:
    from fedprivacy.data.heart_disease import load_heart_disease

    return load_heart_disease(data_dir)


def _tcga_brca(
    data_dir: str | os.PathLike[str] | None, seed: int, path: str | os.PathLike[str] | None
) -> SiloDataset:
    from fedprivacy.data.tcga_brca import load_tcga_brca

    return load_tcga_brca(data_dir)


def _creditcard(
    data_dir: str | os.PathLike[str] | None, seed: int, path: str | os.PathLike[str] | None
) -> SiloDataset:
    from fedprivacy.data.creditcard import load_creditcard

    return load_creditcard(data_dir, path=path, seed=seed)


def _creditcard_synthetic(
    data_dir: str | os.PathLike[str] | None, seed: int, path: str | os.PathLike[str] | None
) -> SiloDataset:
    from fedprivacy.data.creditcard import creditcard_pool, synthetic_creditcard

    return creditcard_pool(synthetic_creditcard(seed=seed), seed=seed)


SILO_LOADERS.register("heart_disease", _heart_disease)
SILO_LOADERS.register("tcga_brca", _tcga_brca)
SILO_LOADERS.register("mnist", lambda data_dir, seed, path: load_mnist_pool(data_dir))
SILO_LOADERS.register("creditcard", _creditcard)
SILO_LOADERS.register("creditcard-synthetic", _creditcard_synthetic)

#: Names accepted by :func:`load_silo_dataset` (the built-in datasets of :data:`SILO_LOADERS`).
SILO_DATASETS: tuple[str, ...] = tuple(SILO_LOADERS)
