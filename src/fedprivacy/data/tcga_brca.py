"""Fed-TCGA-BRCA: breast-cancer survival data in FLamby's 6 regions, as FLamby serves it.

Three files of the data directory, checked against :data:`fedprivacy.data.sources.KNOWN_FILES`
(FLamby stores them in its repository, ``flamby/datasets/fed_tcga_brca/``):

- ``tcga_brca/brca.csv``: 1,096 patients; ``pid`` (TCGA barcode), 39 preprocessed clinical
  features (age and one-hot categories), the event indicator ``E`` and the time ``T``.
- ``tcga_brca/train_test_split.csv``: for 1,088 patients, ``fold`` (train/test) and ``fold2``
  (``train_k`` / ``test_k``, ``k`` the region index). FLamby builds center ``k`` from
  ``fold2`` and so do we: **866 train / 222 test**, per region 248/63, 156/40, 164/42,
  129/33, 129/33, 40/11. The 8 patients of ``brca.csv`` not listed (tissue source sites in
  Nigeria, Pakistan and Brazil, region ``Other``) belong to no center and are left out, as
  in FLamby.
- ``tcga_brca/centers.csv``: tissue source site (TSS) code -> region. Used to name the silos
  and to check that every patient's region (from the TSS code, the second field of the
  barcode) is the region of its ``fold2`` index: 0 Northeast (311), 1 South (196), 2 West
  (206), 3 Midwest (162), 4 Europe (162), 5 Canada (51).

Records keep the order of ``brca.csv`` within a silo (FLamby selects rows with ``isin``).
Features are FLamby's, not normalised (FLamby applies none for this dataset), except that by
default ``age_at_index`` is **centred at a public constant**, :data:`TCGA_AGE_CENTRE` = 60 years
(``centre_age=False`` keeps FLamby's raw years). The Cox partial likelihood and the C-index do
not change when a constant vector is subtracted from every record (the scores move by one
constant), and neither does any gradient of a whole batch, so this is a pure
re-parametrisation for every method that clips whole-batch gradients or model deltas
(DEFAULT, ULDP-NAIVE, -AVG, -SGD). It matters for per-record clipping (DP-SGD in ULDP-GROUP):
the per-record gradient terms ``a_i x_i`` of a Cox loss satisfy ``sum_i a_i = 0``, so with
ages near 58 their large common part ``a_i * 58`` cancels in the sum, but not after each term
is clipped by a different factor; the leftover pushes the model along the mean record (mostly
``age``), and with raw ages DP-SGD drifts to ranking patients by age alone (test C-index 0.29
at every group size, noise or no noise). The constant is data-independent, so centring costs
no privacy. The targets are
``float32`` ``(n, 2)`` arrays ``(E, T)``; the model is FLamby's linear Cox model, trained with
the Cox partial likelihood (which needs at least two records in a batch) and scored by the
C-index.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fedprivacy.data.silo_dataset import SiloDataset, make_silo_dataset
from fedprivacy.data.sources import resolve_data_dir, verify_known_file
from fedprivacy.errors import ChecksumError

TCGA_BRCA_FILE = "tcga_brca/brca.csv"
TCGA_CENTERS_FILE = "tcga_brca/centers.csv"
TCGA_SPLIT_FILE = "tcga_brca/train_test_split.csv"

#: The regions in FLamby's center order (``fold2`` index).
TCGA_REGIONS: tuple[str, ...] = ("Northeast", "South", "West", "Midwest", "Europe", "Canada")

#: Number of clinical features.
TCGA_NUM_FEATURES = 39

#: Public, data-independent centre subtracted from ``age_at_index`` (years); see the module
#: docstring. The training patients' mean age is 58.4.
TCGA_AGE_CENTRE = 60.0

SOURCE_TCGA = "TCGA-BRCA clinical data, FLamby Fed-TCGA-BRCA (6 regions, checksums verified)"


def _read_csv(path: Path) -> list[list[str]]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return [row for row in csv.reader(fh) if row]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ChecksumError(f"cannot read {str(path)!r}: {exc}") from exc


def _regions(path: Path) -> dict[str, str]:
    rows = _read_csv(path)
    header = rows[0] if rows else []
    if "TSS Code" not in header or "Region" not in header:
        raise ChecksumError(f"{str(path)!r}: expected columns 'TSS Code' and 'Region'")
    code, region = header.index("TSS Code"), header.index("Region")
    return {r[code]: r[region] for r in rows[1:]}


def _split(path: Path) -> dict[str, tuple[bool, int]]:
    rows = _read_csv(path)
    if not rows or rows[0][:3] != ["pid", "fold", "fold2"]:
        raise ChecksumError(f"{str(path)!r}: expected the header pid,fold,fold2")
    out: dict[str, tuple[bool, int]] = {}
    for r in rows[1:]:
        pid, fold, fold2 = r[0], r[1], r[2]
        prefix, _, index = fold2.partition("_")
        if fold not in ("train", "test") or prefix != fold or not index.isdigit():
            raise ChecksumError(f"{str(path)!r}: invalid fold {fold!r} / {fold2!r} for {pid}")
        k = int(index)
        if k >= len(TCGA_REGIONS):
            raise ChecksumError(f"{str(path)!r}: region index {k} out of range for {pid}")
        out[pid] = (fold == "train", k)
    return out


def load_tcga_brca(
    data_dir: str | os.PathLike[str] | None = None, *, centre_age: bool = True
) -> SiloDataset:
    """Load Fed-TCGA-BRCA: 6 fixed silos (regions), 39 features, survival targets ``(E, T)``.

    See the module docstring for the files and the construction of the silos.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Data directory holding ``tcga_brca/``; ``None`` uses ``$FEDPRIVACY_DATA``.
    centre_age : bool
        Subtract :data:`TCGA_AGE_CENTRE` from ``age_at_index`` (default); ``False`` keeps
        FLamby's raw years.

    Returns
    -------
    SiloDataset
        ``task="survival"``, silos :data:`TCGA_REGIONS` with 248/156/164/129/129/40 training
        and 63/40/42/33/33/11 test records.

    Raises
    ------
    DataNotFoundError
        If the directory or a file is missing.
    ChecksumError
        If a file is not the published version, cannot be parsed, or the files disagree.
    """
    root = resolve_data_dir(data_dir, [TCGA_BRCA_FILE, TCGA_CENTERS_FILE, TCGA_SPLIT_FILE])
    brca_path = verify_known_file(root, TCGA_BRCA_FILE)
    regions = _regions(verify_known_file(root, TCGA_CENTERS_FILE))
    split = _split(verify_known_file(root, TCGA_SPLIT_FILE))
    rows = _read_csv(brca_path)
    header = rows[0] if rows else []
    if len(header) != TCGA_NUM_FEATURES + 3 or header[0] != "pid" or header[-2:] != ["E", "T"]:
        raise ChecksumError(
            f"{str(brca_path)!r}: expected pid, {TCGA_NUM_FEATURES} features, E, T as columns"
        )
    feature_names = tuple(header[1 : 1 + TCGA_NUM_FEATURES])
    if feature_names[0] != "age_at_index":
        raise ChecksumError(f"{str(brca_path)!r}: the first feature must be age_at_index")
    parts: dict[tuple[bool, int], list[list[float]]] = {
        (train, k): [] for train in (True, False) for k in range(len(TCGA_REGIONS))
    }
    for r in rows[1:]:
        pid = r[0]
        if pid not in split:
            continue
        train, k = split[pid]
        fields = pid.split("-")
        region = regions.get(fields[1]) if len(fields) > 2 else None
        if region != TCGA_REGIONS[k]:
            raise ChecksumError(
                f"{pid}: tissue source site region {region!r} (centers.csv) is not the region "
                f"{TCGA_REGIONS[k]!r} of its fold {k} (train_test_split.csv)"
            )
        try:
            parts[(train, k)].append([float(v) for v in r[1:]])
        except ValueError as exc:
            raise ChecksumError(f"{str(brca_path)!r}, patient {pid}: {exc}") from exc
    missing = len(split) - sum(len(v) for v in parts.values())
    if missing:
        raise ChecksumError(f"{missing} patients of the split are missing from brca.csv")

    def arrays(train: bool) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
        out = []
        for k in range(len(TCGA_REGIONS)):
            a = np.array(parts[(train, k)], dtype=np.float64).reshape(-1, TCGA_NUM_FEATURES + 2)
            if centre_age:
                a[:, 0] -= TCGA_AGE_CENTRE
            out.append((a[:, :TCGA_NUM_FEATURES], a[:, TCGA_NUM_FEATURES:]))
        return out

    return make_silo_dataset(
        name="tcga_brca",
        source=SOURCE_TCGA + (f", age centred at {TCGA_AGE_CENTRE:g}" if centre_age else ""),
        task="survival",
        silo_names=TCGA_REGIONS,
        train=arrays(True),
        test=arrays(False),
        feature_names=feature_names,
        num_classes=0,
        fixed_silos=True,
    )
