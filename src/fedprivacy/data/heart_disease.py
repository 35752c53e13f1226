"""Fed-Heart-Disease: the UCI Heart Disease data in FLamby's 4 centers, FLamby's preprocessing.

The four files ``heart_disease/processed.{cleveland,hungarian,switzerland,va}.data`` of the
data directory (byte-identical to the files FLamby's download script fetches from UCI; checked
against :data:`fedprivacy.data.sources.KNOWN_FILES`) are read and processed exactly as FLamby's
``HeartDiseaseRaw`` / ``FedHeartDisease`` (``flamby/datasets/fed_heart_disease/dataset.py``):

1. ``?`` marks a missing value. Columns 10, 11, 12 (``slope``, ``ca``, ``thal``, mostly
   missing outside Cleveland) are dropped, then every row with a missing value left
   (including the target): 303 / 294 / 123 / 200 raw rows become **303 / 261 / 46 / 130 =
   740** (the counts of FLamby's README and of the shared data README).
2. Target: column 13 (``num``, 0-4) becomes binary, ``num > 0`` (disease) -> 1.
3. Features: the 10 remaining columns, with ``cp`` (chest pain type, 1-4) and ``restecg``
   (0-2) one-hot encoded with the first level dropped, as ``pandas.get_dummies(columns=[2, 6],
   drop_first=True)`` does; pandas puts the dummies after the other columns, so the 13
   features are :data:`HEART_FEATURES`.
4. Train/test split per center: ``sklearn.model_selection.train_test_split`` on
   ``arange(n_center)`` with ``train_size=0.66``, ``test_size=1 - 0.66``, ``random_state=43``,
   ``shuffle=True``, stratified on the binary target when both classes have more than 2 rows
   (not in Switzerland, which has a single healthy patient). The same call with the same
   arguments gives FLamby's split: **199/104, 172/89, 30/16, 85/45** (486 train, 254 test).
   Records keep the file order within a center.
5. Normalisation (FLamby's default ``normalize=True``, federated mode): each center's train
   and test features are standardised with the mean and the standard deviation (``ddof=1``,
   as ``torch.std``) of that center's *training* records, dividing by ``std + 1e-9`` (so a
   constant feature, e.g. ``chol`` = 0 in Switzerland, becomes 0). We compute the statistics
   in float64 and cast to float32, whereas FLamby works in float32: values may differ in the
   last float32 digit.

Centers are in FLamby's order (0 cleveland, 1 hungarian, 2 switzerland, 3 va). The model of
the benchmark (and of the ULDP-FL paper) is a logistic regression on the 13 features.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.silo_dataset import SiloDataset, make_silo_dataset
from fedprivacy.data.sources import resolve_data_dir, verify_known_file
from fedprivacy.errors import ChecksumError

#: The four centers in FLamby's order, as named in the file names.
HEART_CENTERS: tuple[str, ...] = ("cleveland", "hungarian", "switzerland", "va")

#: Feature names in column order (``cp_k`` / ``restecg_k``: one-hot levels, first dropped).
HEART_FEATURES: tuple[str, ...] = (
    "age",
    "sex",
    "trestbps",
    "chol",
    "fbs",
    "thalach",
    "exang",
    "oldpeak",
    "cp_2",
    "cp_3",
    "cp_4",
    "restecg_1",
    "restecg_2",
)

#: FLamby's train fraction and the ``random_state`` of its per-center split.
HEART_TRAIN_FRACTION = 0.66
HEART_SPLIT_SEED = 43

#: Added to the standard deviation before dividing (FLamby).
HEART_STD_EPS = 1e-9

SOURCE_HEART = (
    "UCI Heart Disease, FLamby Fed-Heart-Disease preprocessing (4 centers, checksums verified)"
)

_RAW_COLUMNS = 14
_DROPPED = (10, 11, 12)
_CONTINUOUS = (0, 1, 3, 4, 5, 7, 8, 9)
_CP, _RESTECG = 2, 6
_CP_LEVELS = (2.0, 3.0, 4.0)
_RESTECG_LEVELS = (1.0, 2.0)

_F64 = NDArray[np.float64]


def heart_file(center: str) -> str:
    """Return the path, relative to the data directory, of a center's file."""
    return f"heart_disease/processed.{center}.data"


def _read_center(path: Path) -> _F64:
    """Parse a ``processed.*.data`` file into a float matrix, ``?`` as NaN."""
    rows: list[list[float]] = []
    with open(path, encoding="ascii") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.strip()
            if not line:
                continue
            fields = line.split(",")
            if len(fields) != _RAW_COLUMNS:
                raise ChecksumError(
                    f"{str(path)!r} line {lineno}: {len(fields)} fields, expected {_RAW_COLUMNS}"
                )
            try:
                rows.append([np.nan if f == "?" else float(f) for f in fields])
            except ValueError as exc:
                raise ChecksumError(f"{str(path)!r} line {lineno}: {exc}") from exc
    return np.array(rows, dtype=np.float64).reshape(-1, _RAW_COLUMNS)


def _clean(raw: _F64) -> tuple[_F64, NDArray[np.int64]]:
    """Drop columns 10-12 and incomplete rows; one-hot ``cp`` and ``restecg``; binarise."""
    kept = np.delete(raw, _DROPPED, axis=1)  # columns 0-9 and the target (now column 10)
    kept = kept[~np.isnan(kept).any(axis=1)]
    cp = kept[:, _CP]
    restecg = kept[:, _RESTECG]
    x = np.column_stack(
        [kept[:, list(_CONTINUOUS)]]
        + [(cp == v).astype(np.float64) for v in _CP_LEVELS]
        + [(restecg == v).astype(np.float64) for v in _RESTECG_LEVELS]
    )
    y = (kept[:, -1] > 0).astype(np.int64)
    return x, y


def flamby_split(labels: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Return FLamby's train mask for one center (see step 4 of the module docstring).

    Parameters
    ----------
    labels : numpy.ndarray of int64
        Binary targets of the center's cleaned rows, in file order.

    Returns
    -------
    numpy.ndarray of bool
        ``True`` for training rows.
    """
    from sklearn.model_selection import train_test_split

    n = len(labels)
    levels, counts = np.unique(labels, return_counts=True)
    stratify = labels if len(levels) > 1 and bool(np.all(counts > 2)) else None
    _, test_idx = train_test_split(
        np.arange(n),
        test_size=1.0 - HEART_TRAIN_FRACTION,
        train_size=HEART_TRAIN_FRACTION,
        random_state=HEART_SPLIT_SEED,
        shuffle=True,
        stratify=stratify,
    )
    train = np.ones(n, dtype=bool)
    train[np.asarray(test_idx, dtype=np.int64)] = False
    return train


def load_heart_disease(
    data_dir: str | os.PathLike[str] | None = None, *, normalize: bool = True
) -> SiloDataset:
    """Load Fed-Heart-Disease: 4 fixed silos, 13 features, binary target.

    See the module docstring for every preprocessing step and where it comes from.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``heart_disease/``; ``None`` uses ``$FEDPRIVACY_DATA``.
    normalize : bool
        Standardise each center with its training statistics (FLamby's default).

    Returns
    -------
    SiloDataset
        ``task="binary"``, silos ``cleveland, hungarian, switzerland, va`` with 199/172/30/85
        training and 104/89/16/45 test records.

    Raises
    ------
    DataNotFoundError
        If the directory or a file is missing (the message names the file and its URL).
    ChecksumError
        If a file is not the published version or cannot be parsed.
    """
    root = resolve_data_dir(data_dir, [heart_file(c) for c in HEART_CENTERS])
    train: list[tuple[_F64, NDArray[np.int64]]] = []
    test: list[tuple[_F64, NDArray[np.int64]]] = []
    for center in HEART_CENTERS:
        path = verify_known_file(root, heart_file(center))
        x, y = _clean(_read_center(path))
        mask = flamby_split(y)
        x_train, x_test = x[mask], x[~mask]
        if normalize:
            mean = x_train.mean(axis=0)
            std = x_train.std(axis=0, ddof=1) + HEART_STD_EPS
            x_train = (x_train - mean) / std
            x_test = (x_test - mean) / std
        train.append((x_train, y[mask]))
        test.append((x_test, y[~mask]))
    return make_silo_dataset(
        name="heart_disease",
        source=SOURCE_HEART if normalize else SOURCE_HEART + ", not normalised",
        task="binary",
        silo_names=HEART_CENTERS,
        train=train,
        test=test,
        feature_names=HEART_FEATURES,
        num_classes=2,
        fixed_silos=True,
    )
