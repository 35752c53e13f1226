"""Creditcard: the Kaggle Credit Card Fraud data (user-supplied) or a synthetic stand-in.

The Kaggle file ``creditcard.csv`` (ULB Machine Learning Group, 284,807 transactions of two
days of September 2013, 492 frauds) cannot be redistributed here: a user downloads it from
:data:`CREDITCARD_URL` and puts it at ``<data-dir>/creditcard/creditcard.csv`` (or passes its
path). No checksum of the file is published, so the loader checks its *schema* instead: the
header must be exactly :data:`CREDITCARD_COLUMNS` (``Time, V1..V28, Amount, Class``, quotes
allowed), every value numeric and finite, ``Class`` 0 or 1. A file with the Kaggle row and
fraud counts is labelled as the Kaggle data; any other row count is labelled as a
user-supplied file with the Kaggle schema. A SHA-256 can be given to pin a copy.

For tests and demonstrations, :func:`synthetic_creditcard` generates a small table with the
same schema, and :func:`write_creditcard_csv` writes it in Kaggle's format; everything built
from it carries ``synthetic stand-in`` in its ``source``.

The federated version (:func:`creditcard_pool`) follows the authors' code of the ULDP-FL
paper (``load_dataset`` in ``src/dataset.py`` of github.com/FumiyukiKato/uldp-fl); the paper
only says "we undersample the dataset and use about 25K training data":

1. Features: the 30 columns other than ``Class`` (``Time``, ``V1..V28``, ``Amount``).
2. Train/test split 85 % / 15 %, stratified on ``Class``
   (``sklearn.model_selection.train_test_split(test_size=0.15, stratify=y)``). The authors
   pass their run's ``numpy.random.RandomState``; we pass the integer ``seed``.
3. Standardisation with the mean and standard deviation (``ddof=0``, constant features left
   unscaled) of the *whole* training part, before under-sampling (``StandardScaler``).
4. Under-sampling of the training part only: every fraud is kept and ``int(0.1 * n_legit)``
   legitimate transactions are drawn without replacement (the authors draw them from numpy's
   global generator; we use ``numpy.random.default_rng(seed)``). On the Kaggle file this
   gives 418 frauds + 24,166 legitimate = 24,584 training records (the authors' comment says
   24,584). The test part keeps its natural imbalance (42,722 records, about 0.17 % fraud).

Records of both parts keep the file order. The result is a pool: users and silos are
allocated afterwards (:func:`fedprivacy.data.allocators.allocate_pool`, 5 silos in the paper).
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.data.silo_dataset import POOL_NAME, SiloDataset, make_silo_dataset, readonly
from fedprivacy.data.sources import resolve_data_dir
from fedprivacy.errors import ChecksumError, DataNotFoundError, ParameterError

CREDITCARD_URL = "https://www.kaggle.com/datasets/mlg-ulb/creditcardfraud"

#: Path of the file relative to the data directory.
CREDITCARD_FILE = "creditcard/creditcard.csv"

#: The 30 feature columns, in file order.
CREDITCARD_FEATURES: tuple[str, ...] = ("Time", *(f"V{i}" for i in range(1, 29)), "Amount")

#: The header of the Kaggle file.
CREDITCARD_COLUMNS: tuple[str, ...] = (*CREDITCARD_FEATURES, "Class")

#: Rows and frauds of the Kaggle file.
CREDITCARD_ROWS = 284_807
CREDITCARD_FRAUDS = 492

#: Defaults of :func:`creditcard_pool` (the authors' values).
CREDITCARD_TEST_FRACTION = 0.15
CREDITCARD_MAJORITY_FRACTION = 0.1

#: Time span of the Kaggle data in seconds (two days), used by the stand-in.
_TIME_SPAN = 172_792.0

SYNTHETIC_MARK = "synthetic stand-in"

_F64 = NDArray[np.float64]
_I64 = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class CreditcardTable:
    """The raw table, before any split or scaling.

    Parameters
    ----------
    features : numpy.ndarray
        ``float64`` of shape ``(n, 30)``: ``Time, V1..V28, Amount``. Read-only.
    labels : numpy.ndarray
        ``int64`` of shape ``(n,)``: ``Class`` (1 = fraud). Read-only.
    source : str
        Provenance (says ``synthetic stand-in`` for generated data).
    """

    features: _F64
    labels: _I64
    source: str

    @property
    def num_records(self) -> int:
        """Number of transactions."""
        return int(len(self.labels))

    @property
    def num_frauds(self) -> int:
        """Number of frauds (``Class == 1``)."""
        return int(self.labels.sum())

    @property
    def is_synthetic(self) -> bool:
        """Whether the table was generated rather than read from the Kaggle schema file."""
        return SYNTHETIC_MARK in self.source


def _header(line: str) -> tuple[str, ...]:
    return tuple(f.strip().strip('"').strip() for f in line.strip().split(","))


def _check_header(path: Path, found: tuple[str, ...]) -> None:
    """Refuse a header other than :data:`CREDITCARD_COLUMNS`, saying what differs."""
    if found == CREDITCARD_COLUMNS:
        return
    missing = [c for c in CREDITCARD_COLUMNS if c not in found]
    extra = [c for c in found if c not in CREDITCARD_COLUMNS]
    detail = (
        f"missing {missing}, unexpected {extra}"
        if missing or extra
        else "same names in another order"
    )
    raise ChecksumError(
        f"{str(path)!r} does not have the Kaggle creditcard.csv schema: expected the "
        f"{len(CREDITCARD_COLUMNS)} columns Time, V1..V28, Amount, Class in this order; "
        f"found {len(found)} columns ({detail})."
    )


def read_creditcard(path: str | os.PathLike[str], *, sha256: str | None = None) -> CreditcardTable:
    """Read a file with the Kaggle ``creditcard.csv`` schema and check it.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    sha256 : str or None
        Expected SHA-256 of the file, checked when given.

    Returns
    -------
    CreditcardTable
        The table; ``source`` says whether the row and fraud counts are Kaggle's.

    Raises
    ------
    DataNotFoundError
        If the file does not exist; the message names it and says where to download it.
    ChecksumError
        If the header is not :data:`CREDITCARD_COLUMNS` (the message shows what was found), a
        value is not a finite number, ``Class`` is not 0/1, or the SHA-256 differs.
    """
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(
            f"Kaggle Credit Card Fraud data not found: expected the file {str(p)!r}. Download "
            f"creditcard.csv from {CREDITCARD_URL} (free Kaggle account) and put it at "
            f"<data-dir>/{CREDITCARD_FILE}, or pass its path."
        )
    raw = p.read_bytes()
    if sha256 is not None:
        actual = hashlib.sha256(raw).hexdigest()
        if actual != sha256.lower():
            raise ChecksumError(f"{str(p)!r}: SHA-256 is {actual}, expected {sha256.lower()}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ChecksumError(f"{str(p)!r} is not a UTF-8 text file ({exc})") from exc
    first, _, body = text.partition("\n")
    _check_header(p, _header(first))
    try:
        data = np.loadtxt(
            io.StringIO(body.replace('"', "")), delimiter=",", dtype=np.float64, ndmin=2
        )
    except ValueError as exc:
        raise ChecksumError(f"{str(p)!r}: not a table of numbers ({exc})") from exc
    if data.shape[0] == 0:
        raise ChecksumError(f"{str(p)!r} has a header but no records")
    if data.shape[1] != len(CREDITCARD_COLUMNS):
        raise ChecksumError(
            f"{str(p)!r}: records have {data.shape[1]} fields, expected {len(CREDITCARD_COLUMNS)}"
        )
    if not np.all(np.isfinite(data)):
        row = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
        raise ChecksumError(f"{str(p)!r}: record {row + 1} holds a non-finite value")
    cls = data[:, -1]
    if not np.all((cls == 0) | (cls == 1)):
        row = int(np.flatnonzero((cls != 0) & (cls != 1))[0])
        raise ChecksumError(f"{str(p)!r}: record {row + 1} has Class {cls[row]!r}, not 0 or 1")
    labels = cls.astype(np.int64)
    n, frauds = len(labels), int(labels.sum())
    if n == CREDITCARD_ROWS and frauds == CREDITCARD_FRAUDS:
        source = (
            f"Kaggle Credit Card Fraud (user-supplied creditcard.csv: {n:,} rows, {frauds} "
            f"frauds, schema and counts checked"
            + (", SHA-256 pinned)" if sha256 is not None else "; no published checksum)")
        )
    else:
        source = (
            f"user-supplied file with the Kaggle creditcard.csv schema ({n:,} rows, {frauds} "
            f"frauds; the Kaggle original has {CREDITCARD_ROWS:,} and {CREDITCARD_FRAUDS})"
        )
    return CreditcardTable(
        features=readonly(np.ascontiguousarray(data[:, :-1])),
        labels=readonly(labels),
        source=source,
    )


def synthetic_creditcard(
    n: int = CREDITCARD_ROWS,
    seed: int = 0,
    *,
    fraud_rate: float = CREDITCARD_FRAUDS / CREDITCARD_ROWS,
) -> CreditcardTable:
    """Generate a small synthetic stand-in with the Kaggle schema (for tests, not for results).

    ``Time`` is sorted and uniform over two days, ``V1..V28`` standard normal with frauds
    shifted by a fixed random direction (so a classifier has something to learn), ``Amount``
    log-normal rounded to cents. The number of frauds is ``round(fraud_rate * n)``, at least 2
    (so that a stratified split works), placed at random rows.

    The defaults give the Kaggle sizes (284,807 rows, 492 frauds), so that
    :func:`creditcard_pool` yields the paper's 24,584 training records and the allocations of
    the paper (up to 1,000 users) can be run on it; tests pass a small ``n``.

    Parameters
    ----------
    n : int
        Number of transactions, at least 4.
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same table.
    fraud_rate : float
        Fraction of frauds, in ``(0, 0.5]`` (default: Kaggle's 492 / 284,807).

    Returns
    -------
    CreditcardTable
        ``source`` contains ``synthetic stand-in``.

    Raises
    ------
    ParameterError
        If an argument is out of range.
    """
    n = require_int("n", n, 4)
    seed = require_int("seed", seed, 0)
    if not (isinstance(fraud_rate, int | float) and 0 < fraud_rate <= 0.5):
        raise ParameterError("fraud_rate", f"must lie in (0, 0.5], got {fraud_rate!r}")
    rng = np.random.default_rng(seed)
    frauds = max(2, round(fraud_rate * n))
    labels = np.zeros(n, dtype=np.int64)
    labels[rng.choice(n, size=frauds, replace=False)] = 1
    time = np.sort(np.round(rng.uniform(0.0, _TIME_SPAN, size=n)))
    shift = rng.normal(0.0, 1.0, size=28)
    v = rng.normal(0.0, 1.0, size=(n, 28)) + np.outer(labels, 1.5 * shift)
    amount = np.round(np.exp(rng.normal(3.0, 1.5, size=n)), 2)
    features = np.column_stack([time, v, amount])
    return CreditcardTable(
        features=readonly(features),
        labels=readonly(labels),
        source=(
            f"{SYNTHETIC_MARK} for the Kaggle creditcard.csv (generated: n={n}, seed={seed}, "
            f"fraud_rate={fraud_rate}) - not real data"
        ),
    )


def write_creditcard_csv(table: CreditcardTable, path: str | os.PathLike[str]) -> Path:
    """Write a table in the Kaggle file's format (quoted header, quoted ``Class``).

    Parameters
    ----------
    table : CreditcardTable
        The table, e.g. from :func:`synthetic_creditcard`.
    path : str or os.PathLike
        Destination; parent folders are created.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(f'"{c}"' for c in CREDITCARD_COLUMNS)]
    for row, label in zip(table.features, table.labels, strict=True):
        lines.append(",".join(repr(float(v)) for v in row) + f',"{int(label)}"')
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def creditcard_pool(
    table: CreditcardTable,
    seed: int = 0,
    *,
    test_fraction: float = CREDITCARD_TEST_FRACTION,
    majority_fraction: float = CREDITCARD_MAJORITY_FRACTION,
) -> SiloDataset:
    """Split, standardise and under-sample a table as the ULDP-FL experiments do.

    See steps 1-4 of the module docstring.

    Parameters
    ----------
    table : CreditcardTable
        From :func:`read_creditcard` or :func:`synthetic_creditcard`.
    seed : int
        Seed of the split (``random_state``) and of the under-sampling.
    test_fraction : float
        Fraction of the records held out for the test set, in ``(0, 1)``.
    majority_fraction : float
        Fraction of the legitimate training transactions kept, in ``(0, 1]``.

    Returns
    -------
    SiloDataset
        ``name="creditcard"``, ``task="binary"``, one pseudo-silo ``"pool"``; ``source`` is
        the table's plus the preprocessing.

    Raises
    ------
    ParameterError
        If a fraction is out of range, or either class has fewer than 2 records (a stratified
        split is impossible).
    """
    from sklearn.model_selection import train_test_split

    seed = require_int("seed", seed, 0)
    if not (isinstance(test_fraction, int | float) and 0 < test_fraction < 1):
        raise ParameterError("test_fraction", f"must lie in (0, 1), got {test_fraction!r}")
    if not (isinstance(majority_fraction, int | float) and 0 < majority_fraction <= 1):
        raise ParameterError("majority_fraction", f"must lie in (0, 1], got {majority_fraction!r}")
    counts = np.bincount(table.labels, minlength=2)
    if counts.min() < 2:
        raise ParameterError(
            "table", f"needs at least 2 records of each class, has {counts.tolist()}"
        )
    x, y = table.features, table.labels
    train_idx, test_idx = train_test_split(
        np.arange(len(y)), test_size=test_fraction, random_state=seed, stratify=y
    )
    train_idx = np.sort(np.asarray(train_idx, dtype=np.int64))
    test_idx = np.sort(np.asarray(test_idx, dtype=np.int64))
    mean = x[train_idx].mean(axis=0)
    std = x[train_idx].std(axis=0)
    std[std == 0] = 1.0  # StandardScaler leaves constant features unscaled
    legit = train_idx[y[train_idx] == 0]
    keep = int(len(legit) * majority_fraction)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(legit, size=keep, replace=False))
    train_idx = np.sort(np.concatenate([train_idx[y[train_idx] == 1], chosen]))
    source = (
        f"{table.source}; split {1 - test_fraction:g}/{test_fraction:g} stratified "
        f"(seed {seed}), standardised on the training part, legitimate training records "
        f"under-sampled to {majority_fraction:g}"
    )
    return make_silo_dataset(
        name="creditcard",
        source=source,
        task="binary",
        silo_names=(POOL_NAME,),
        train=[((x[train_idx] - mean) / std, y[train_idx])],
        test=[((x[test_idx] - mean) / std, y[test_idx])],
        feature_names=CREDITCARD_FEATURES,
        num_classes=2,
        fixed_silos=False,
    )


def load_creditcard(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    sha256: str | None = None,
) -> SiloDataset:
    """Read a user-supplied ``creditcard.csv`` and prepare it as :func:`creditcard_pool`.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``creditcard/creditcard.csv``; ``None`` uses
        ``$FEDPRIVACY_DATA``. Ignored when ``path`` is given.
    path : str or os.PathLike or None
        Explicit path of the file.
    seed : int
        Seed of the split and the under-sampling.
    sha256 : str or None
        Expected SHA-256 of the file, checked when given.

    Returns
    -------
    SiloDataset
        The pool (see :func:`creditcard_pool`).

    Raises
    ------
    DataNotFoundError
        If the directory or the file is missing.
    ChecksumError
        If the file does not have the Kaggle schema (see :func:`read_creditcard`).
    """
    file = (
        Path(path)
        if path is not None
        else resolve_data_dir(data_dir, [CREDITCARD_FILE]) / CREDITCARD_FILE
    )
    return creditcard_pool(read_creditcard(file, sha256=sha256), seed)
