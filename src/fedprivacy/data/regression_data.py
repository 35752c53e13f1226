"""Real regression data in silos: California Housing and Diabetes (substitutes for NIO data).

The paper's application uses NIO's user community data, which is not public. These loaders give
two public substitutes, read from a data directory (argument or ``$FEDPRIVACY_DATA``) and
checked against :data:`fedprivacy.data.sources.KNOWN_FILES` before reading:

California Housing (``california_housing/housing.tgz``, the StatLib data with Geron's
``ocean_proximity`` column; 20,640 districts)
    Silos: the 5 values of ``ocean_proximity`` (<1H OCEAN 9136, INLAND 6551, NEAR OCEAN 2658,
    NEAR BAY 2290, ISLAND 5), in that order. Features: the 8 numeric columns (longitude,
    latitude, housing_median_age, total_rooms, total_bedrooms, population, households,
    median_income); response: median_house_value. **Missing values**: 207 ``total_bedrooms`` are
    empty on purpose; ``missing="impute"`` (default) replaces each by the median of
    ``total_bedrooms`` *within its own silo* (a local operation, no data leave the silo; ISLAND
    has none missing), ``missing="drop"`` drops those 207 rows.

Diabetes (``diabetes_sklearn/diabetes_data_raw.csv.gz`` and ``diabetes_target.csv.gz``, the
unscaled files bundled with scikit-learn; 442 patients, 10 features)
    Silos: a random split (seeded) into ``clients`` near-equal parts.

Both: features and response are standardised with the pooled mean and standard deviation
(``ddof=0``) and an intercept column is appended, so ``p = 9`` (California) and ``p = 11``
(Diabetes). The standardisation uses pooled statistics: it is preprocessing outside the privacy
analysis (as usual in DP regression benchmarks; in practice public bounds would be used).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.data.sources import resolve_data_dir, verify_known_file
from fedprivacy.errors import ChecksumError, ParameterError

__all__ = [
    "CALIFORNIA_FEATURES",
    "CALIFORNIA_FILE",
    "CALIFORNIA_SILOS",
    "DIABETES_FEATURES",
    "DIABETES_FILES",
    "NIO_NOTE",
    "REGRESSION_LOADERS",
    "RegressionSilos",
    "load_california_housing",
    "load_diabetes",
    "load_regression_dataset",
]

#: Said in every output that uses these data.
NIO_NOTE: Final = (
    "The paper's NIO user community data is not public; California Housing (silos by "
    "ocean_proximity) and scikit-learn's Diabetes data (random silos) substitute it."
)

CALIFORNIA_FILE: Final = "california_housing/housing.tgz"
CALIFORNIA_MEMBER: Final = "housing/housing.csv"
CALIFORNIA_SILOS: Final = ("<1H OCEAN", "INLAND", "NEAR OCEAN", "NEAR BAY", "ISLAND")
CALIFORNIA_FEATURES: Final = (
    "longitude",
    "latitude",
    "housing_median_age",
    "total_rooms",
    "total_bedrooms",
    "population",
    "households",
    "median_income",
)
CALIFORNIA_TARGET: Final = "median_house_value"
DIABETES_FILES: Final = (
    "diabetes_sklearn/diabetes_data_raw.csv.gz",
    "diabetes_sklearn/diabetes_target.csv.gz",
)
DIABETES_FEATURES: Final = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class RegressionSilos:
    """A regression data set split into silos (clients).

    Attributes
    ----------
    name : str
        ``california`` or ``diabetes``.
    silo_names : tuple of str
        One name per silo.
    x : tuple of ndarray
        Per-silo standardised designs ``(n_k, p)`` with an intercept column last.
    y : tuple of ndarray
        Per-silo standardised responses ``(n_k,)``.
    feature_names : tuple of str
        Column names (the last is ``intercept``).
    source : str
        What was read and how it was processed.
    notes : tuple of str
        Caveats to show with any result (always includes :data:`NIO_NOTE`).
    """

    name: str
    silo_names: tuple[str, ...]
    x: tuple[F64, ...]
    y: tuple[F64, ...]
    feature_names: tuple[str, ...]
    source: str
    notes: tuple[str, ...]

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Silo sizes ``n_k``."""
        return np.array([a.shape[0] for a in self.x], dtype=np.int64)

    @property
    def dimension(self) -> int:
        """``p`` (including the intercept)."""
        return int(self.x[0].shape[1])

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "name": self.name,
            "silos": {n: int(s) for n, s in zip(self.silo_names, self.sizes, strict=True)},
            "records": int(self.sizes.sum()),
            "features": list(self.feature_names),
            "source": self.source,
            "notes": list(self.notes),
        }


def _standardise(xs: list[F64], ys: list[F64]) -> tuple[list[F64], list[F64]]:
    x_all, y_all = np.concatenate(xs), np.concatenate(ys)
    mx, sx = x_all.mean(axis=0), x_all.std(axis=0)
    my, sy = y_all.mean(), y_all.std()
    sx = np.where(sx > 0, sx, 1.0)
    out_x = [np.column_stack([(x - mx) / sx, np.ones(x.shape[0])]) for x in xs]
    out_y = [(y - my) / sy for y in ys]
    return out_x, out_y


def _read_california(path: os.PathLike[str]) -> tuple[list[list[str]], list[str]]:
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = tar.extractfile(CALIFORNIA_MEMBER)
            if member is None:
                raise ChecksumError(f"{CALIFORNIA_MEMBER} missing from {os.fspath(path)!r}")
            text = member.read().decode("utf-8")
    except (tarfile.TarError, KeyError, OSError) as exc:
        raise ChecksumError(
            f"cannot read {CALIFORNIA_MEMBER} from {os.fspath(path)!r}: {exc}"
        ) from exc
    rows = list(csv.reader(io.StringIO(text)))
    return rows[1:], rows[0]


def load_california_housing(
    data_dir: str | os.PathLike[str] | None = None, *, missing: str = "impute"
) -> RegressionSilos:
    """California Housing in 5 silos by ``ocean_proximity`` (module docstring).

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``california_housing/housing.tgz``; ``None`` uses
        ``$FEDPRIVACY_DATA``.
    missing : {"impute", "drop"}
        Missing ``total_bedrooms``: the silo's median, or drop the rows.

    Returns
    -------
    RegressionSilos
        ``p = 9`` (8 features and an intercept).

    Raises
    ------
    DataNotFoundError
        If the directory or the file is missing.
    ChecksumError
        If the file is not the published one or cannot be parsed.
    ParameterError
        If ``missing`` is not one of the two strategies.
    """
    if missing not in ("impute", "drop"):
        raise ParameterError("missing", f"must be 'impute' or 'drop', got {missing!r}")
    path = verify_known_file(resolve_data_dir(data_dir, [CALIFORNIA_FILE]), CALIFORNIA_FILE)
    rows, header = _read_california(path)
    cols = [header.index(c) for c in (*CALIFORNIA_FEATURES, CALIFORNIA_TARGET)]
    prox = header.index("ocean_proximity")
    xs: list[F64] = []
    ys: list[F64] = []
    missing_count = 0
    for silo in CALIFORNIA_SILOS:
        mat = np.array(
            [[float(r[c]) if r[c] != "" else np.nan for c in cols] for r in rows if r[prox] == silo]
        )
        bad = np.isnan(mat).any(axis=1)
        missing_count += int(bad.sum())
        if missing == "drop":
            mat = mat[~bad]
        else:
            col = CALIFORNIA_FEATURES.index("total_bedrooms")
            nan = np.isnan(mat[:, col])
            mat[nan, col] = np.median(mat[~nan, col])
        if np.isnan(mat).any():
            raise ChecksumError("unexpected missing values outside total_bedrooms")
        xs.append(mat[:, :-1])
        ys.append(mat[:, -1])
    sx, sy = _standardise(xs, ys)
    how = (
        "replaced by the median of total_bedrooms within the same silo"
        if missing == "impute"
        else "rows dropped"
    )
    return RegressionSilos(
        name="california",
        silo_names=CALIFORNIA_SILOS,
        x=tuple(sx),
        y=tuple(sy),
        feature_names=(*CALIFORNIA_FEATURES, "intercept"),
        source=(
            "California Housing (StatLib, with ocean_proximity; checksum verified), silos by "
            "ocean_proximity, pooled standardisation"
        ),
        notes=(NIO_NOTE, f"{missing_count} missing total_bedrooms values: {how}."),
    )


def _read_gz_matrix(path: os.PathLike[str]) -> F64:
    try:
        with gzip.open(path, "rt", encoding="ascii") as fh:
            return np.loadtxt(fh, dtype=np.float64, ndmin=2)
    except (OSError, ValueError, EOFError) as exc:
        raise ChecksumError(f"cannot parse {os.fspath(path)!r}: {exc}") from exc


def load_diabetes(
    data_dir: str | os.PathLike[str] | None = None, *, clients: int = 5, seed: int = 0
) -> RegressionSilos:
    """Diabetes (442 x 10) split at random into ``clients`` silos (module docstring).

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``diabetes_sklearn/``; ``None`` uses ``$FEDPRIVACY_DATA``.
    clients : int
        Number of silos ``K`` (1 .. 44, at least 10 patients each).
    seed : int
        Seed of the split.

    Returns
    -------
    RegressionSilos
        ``p = 11`` (10 features and an intercept).

    Raises
    ------
    DataNotFoundError
        If the directory or a file is missing.
    ChecksumError
        If a file is not the published one or cannot be parsed.
    ParameterError
        If ``clients`` is out of range.
    """
    if isinstance(clients, bool) or not isinstance(clients, int) or not 1 <= clients <= 44:
        raise ParameterError("clients", f"must be an integer in [1, 44], got {clients!r}")
    root = resolve_data_dir(data_dir, DIABETES_FILES)
    x_path, y_path = (verify_known_file(root, f) for f in DIABETES_FILES)
    x = _read_gz_matrix(x_path)
    y = _read_gz_matrix(y_path).ravel()
    if x.shape != (442, 10) or y.shape != (442,):
        raise ChecksumError(f"unexpected diabetes shapes {x.shape} and {y.shape}")
    order = np.random.default_rng(seed).permutation(x.shape[0])
    parts = np.array_split(order, clients)
    sx, sy = _standardise([x[i] for i in parts], [y[i] for i in parts])
    return RegressionSilos(
        name="diabetes",
        silo_names=tuple(f"silo{k}" for k in range(clients)),
        x=tuple(sx),
        y=tuple(sy),
        feature_names=(*DIABETES_FEATURES, "intercept"),
        source=(
            f"Diabetes (Efron et al. 2004, scikit-learn's raw files; checksums verified), "
            f"{clients} random silos (seed {seed}), pooled standardisation"
        ),
        notes=(NIO_NOTE,),
    )


#: Loads silos from ``(data_dir, clients, seed, missing)`` (see :func:`load_regression_dataset`).
RegressionLoader = Callable[[str | os.PathLike[str] | None, int, int, str], RegressionSilos]

#: The loader of every dataset name accepted by :func:`load_regression_dataset`.
REGRESSION_LOADERS: Registry[RegressionLoader] = Registry(
    "dataset", "must be {alternatives}, got {name!r}"
)


REGRESSION_LOADERS.register(
    "california",
    lambda data_dir, k, seed, missing: load_california_housing(data_dir, missing=missing),
)
REGRESSION_LOADERS.register(
    "diabetes", lambda data_dir, k, seed, missing: load_diabetes(data_dir, clients=k, seed=seed)
)


def load_regression_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    clients: int = 5,
    seed: int = 0,
    missing: str = "impute",
) -> RegressionSilos:
    """Load ``california`` or ``diabetes`` (``clients`` and ``seed`` only for Diabetes).

    A name added by ``REGRESSION_LOADERS.register`` is loaded by its loader.

    Raises
    ------
    ParameterError
        If ``name`` is not a name of :data:`REGRESSION_LOADERS` (the message lists them).

    Examples
    --------
    >>> try:
    ...     load_regression_dataset("boston")
    ... except ParameterError as exc:
    ...     print(exc)
    dataset: must be 'california' or 'diabetes', got 'boston'
    """
    load = REGRESSION_LOADERS.lookup(name)
    return load(data_dir, clients, seed, missing)
