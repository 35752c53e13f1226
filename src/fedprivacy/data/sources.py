"""Where the data files live, and checks that they are the published ones.

The loaders never download anything. A user points them at a data directory (the ``--data-dir``
option of the command line, the ``data_dir`` argument of :func:`fedprivacy.data.load_dataset` or
the environment variable ``FEDPRIVACY_DATA``) holding files laid out as in
:data:`EXPECTED_LAYOUT`, and every file is checked against the digest published for it (table
:data:`KNOWN_FILES`) before it is read.

Digests are cached per process on ``(path, size, mtime)``, so a large tarball is hashed once per
process, and again only if it changes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedprivacy.data.digests import file_digest, sha256_file
from fedprivacy.errors import ChecksumError, DataNotFoundError

#: Environment variable naming the data directory when no directory is passed explicitly.
DATA_ENV = "FEDPRIVACY_DATA"

#: Environment variable naming the cache directory (decoded image arrays).
CACHE_ENV = "FEDPRIVACY_CACHE"

MNIST_URL = (
    "http://yann.lecun.com/exdb/mnist/ (mirror: https://ossci-datasets.s3.amazonaws.com/mnist/)"
)
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
HEART_DISEASE_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/heart-disease/"
TCGA_BRCA_URL = (
    "https://github.com/owkin/FLamby/tree/main/flamby/datasets/fed_tcga_brca "
    "(train_test_split.csv is in its dataset_creation_scripts/ folder)"
)

#: The layout of a data directory, as shown in error messages.
EXPECTED_LAYOUT = f"""\
<data-dir>/
    mnist/train-images-idx3-ubyte.gz      MNIST, the four original IDX files
    mnist/train-labels-idx1-ubyte.gz
    mnist/t10k-images-idx3-ubyte.gz
    mnist/t10k-labels-idx1-ubyte.gz
    cifar-10-python.tar.gz                CIFAR-10, original python version (preferred)
    cifar10_jpeg/CIFAR-10-images.tar.gz   CIFAR-10, lossy JPEG copy (used when the above is absent)
    cifar-100-python.tar.gz               CIFAR-100, original python version
MNIST: {MNIST_URL}
CIFAR: {CIFAR_URL}"""


@dataclass(frozen=True)
class KnownFile:
    """A data file and the digests that identify its published content.

    A file is accepted when *any* of the given digests matches.

    Parameters
    ----------
    relpath : str
        Path relative to the data directory, with ``/`` separators.
    what : str
        Human description used in error messages.
    url : str
        Where a user can download the file.
    sha256 : str or None
        SHA-256 of the file itself.
    md5 : str or None
        MD5 of the file itself (the CIFAR tarballs publish only MD5).
    gzip_content_sha256 : str or None
        SHA-256 of the decompressed content of a ``.gz`` file, so a recompressed copy of the same
        content is accepted as well.
    """

    relpath: str
    what: str
    url: str
    sha256: str | None = None
    md5: str | None = None
    gzip_content_sha256: str | None = None


#: Every file the loaders read, keyed by path relative to the data directory. Module-level and
#: mutable on purpose: tests replace entries to load small synthetic copies.
KNOWN_FILES: dict[str, KnownFile] = {
    f.relpath: f
    for f in (
        # Train files: byte-identical to the originals. The content digest (official raw SHA-256)
        # also accepts a recompressed copy.
        KnownFile(
            "mnist/train-images-idx3-ubyte.gz",
            "MNIST training images",
            MNIST_URL,
            sha256="440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            gzip_content_sha256="ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        ),
        KnownFile(
            "mnist/train-labels-idx1-ubyte.gz",
            "MNIST training labels",
            MNIST_URL,
            sha256="3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            gzip_content_sha256="65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        ),
        # t10k files in /work/shared/data are recompressions: only their decompressed content is
        # the published one, so they are verified by content.
        KnownFile(
            "mnist/t10k-images-idx3-ubyte.gz",
            "MNIST test images",
            MNIST_URL,
            gzip_content_sha256="0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        ),
        KnownFile(
            "mnist/t10k-labels-idx1-ubyte.gz",
            "MNIST test labels",
            MNIST_URL,
            gzip_content_sha256="ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        ),
        KnownFile(
            "cifar-10-python.tar.gz",
            "CIFAR-10 (original python version)",
            CIFAR_URL,
            md5="c58f30108f718f92721af3b95e74349a",
        ),
        KnownFile(
            "cifar-100-python.tar.gz",
            "CIFAR-100 (original python version)",
            CIFAR_URL,
            md5="eb9058c3a382ffc7106e4002c42a8d85",
        ),
        # UCI Heart Disease, the four centers of FLamby's Fed-Heart-Disease. The MD5s are the ones
        # FLamby's download script checks.
        KnownFile(
            "heart_disease/processed.cleveland.data",
            "Heart Disease, Cleveland center (UCI processed.cleveland.data)",
            HEART_DISEASE_URL + "processed.cleveland.data",
            sha256="a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8",
            md5="2d91a8ff69cfd9616aa47b59d6f843db",
        ),
        KnownFile(
            "heart_disease/processed.hungarian.data",
            "Heart Disease, Hungarian center (UCI processed.hungarian.data)",
            HEART_DISEASE_URL + "processed.hungarian.data",
            sha256="d1ad108f785768cd3d7e82dc522e6f5a61eea93cccfb3a46ee8076f73fc3d796",
            md5="22e96bee155b5973568101c93b3705f6",
        ),
        KnownFile(
            "heart_disease/processed.switzerland.data",
            "Heart Disease, Switzerland center (UCI processed.switzerland.data)",
            HEART_DISEASE_URL + "processed.switzerland.data",
            sha256="834a405ccf5b66ab4056bb77794adc8df0b7125186454c0a1d002d33c6c3b314",
            md5="9a87f7577310b3917730d06ba9349e20",
        ),
        KnownFile(
            "heart_disease/processed.va.data",
            "Heart Disease, VA Long Beach center (UCI processed.va.data)",
            HEART_DISEASE_URL + "processed.va.data",
            sha256="e7c93d8d0d2acdadfa4c5e8de768e2191e7f618b952e29623f1f0d5949ff6b8f",
            md5="4249d03ca7711e84f4444768c9426170",
        ),
        # FLamby's Fed-TCGA-BRCA (files stored in FLamby's repository).
        KnownFile(
            "tcga_brca/brca.csv",
            "TCGA-BRCA clinical data (FLamby brca.csv)",
            TCGA_BRCA_URL,
            sha256="07cb53423f7d579d33cfdbf2cba57b2aee75318b85866c68ce39a75b1f1ba020",
        ),
        KnownFile(
            "tcga_brca/centers.csv",
            "TCGA-BRCA tissue source sites and regions (FLamby centers.csv)",
            TCGA_BRCA_URL,
            sha256="d610df2dae0203ea229c9579747ed3eb8d28e137c5378f55acc6fe6b4632bb1d",
        ),
        KnownFile(
            "tcga_brca/train_test_split.csv",
            "TCGA-BRCA train/test split per region (FLamby train_test_split.csv)",
            TCGA_BRCA_URL,
            sha256="1249c6543a4060ff0fdaf8510fc37017755836db6c9fc5e6af96057c36510990",
        ),
        # Regression data (fedprivacy.data.regression_data): substitutes for the NIO data.
        KnownFile(
            "california_housing/housing.tgz",
            "California Housing with ocean_proximity (housing.tgz)",
            "https://github.com/ageron/data/raw/main/housing.tgz",
            sha256="354f441b3af4eb54e07818501dafc9b0865162d85a24769d754238acedc82ae1",
        ),
        KnownFile(
            "diabetes_sklearn/diabetes_data_raw.csv.gz",
            "Diabetes features (scikit-learn's diabetes_data_raw.csv.gz)",
            "scikit-learn (sklearn/datasets/data/diabetes_data_raw.csv.gz in every release)",
            sha256="7fc0ded571454b1982210d3bb43f0aca44eae01a0b8654a3b24022bdb6b38009",
        ),
        KnownFile(
            "diabetes_sklearn/diabetes_target.csv.gz",
            "Diabetes target (scikit-learn's diabetes_target.csv.gz)",
            "scikit-learn (sklearn/datasets/data/diabetes_target.csv.gz in every release)",
            sha256="8e53f65eb811df43c206f3534bb3af0e5fed213bc37ed6ba36310157d6023803",
        ),
        KnownFile(
            "cifar10_jpeg/CIFAR-10-images.tar.gz",
            "CIFAR-10 (lossy JPEG copy, quality 75)",
            "no public download (a JPEG conversion shipped with this project's shared data); "
            "prefer the original cifar-10-python.tar.gz from " + CIFAR_URL,
            sha256="198278ba60862eb4ab4d57972e9c667f14813e308db4072f4e3ce236a0424fcd",
        ),
    )
}


def layout_of(relpaths: Sequence[str]) -> str:
    """The data-directory layout of the files ``relpaths`` (for a dataset's error messages).

    Examples
    --------
    >>> print(layout_of(["tcga_brca/brca.csv"]).splitlines()[1].split()[0])
    tcga_brca/brca.csv
    """
    lines = ["<data-dir>/"]
    urls: list[str] = []
    for rel in relpaths:
        known = KNOWN_FILES.get(rel)
        lines.append(f"    {rel:<40} {known.what if known else ''}".rstrip())
        if known is not None and known.url not in urls:
            urls.append(known.url)
    return "\n".join(lines + [f"from: {url}" for url in urls])


def resolve_data_dir(
    data_dir: str | os.PathLike[str] | None, files: Sequence[str] | None = None
) -> Path:
    """Return the data directory: ``data_dir`` if given, else ``$FEDPRIVACY_DATA``.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        Explicit data directory; ``None`` falls back to the environment variable
        ``FEDPRIVACY_DATA`` (an empty value counts as unset).
    files : sequence of str or None
        The files (relative paths) the caller will read: error messages show their layout
        (:func:`layout_of`); ``None`` shows the image datasets' :data:`EXPECTED_LAYOUT`.

    Returns
    -------
    pathlib.Path
        The absolute, resolved directory.

    Raises
    ------
    DataNotFoundError
        If neither is given, or the directory does not exist or is not a directory. The message
        explains both ways of naming the directory and the expected layout.
    """
    layout = EXPECTED_LAYOUT if files is None else layout_of(files)
    if data_dir is not None:
        origin = "the data_dir argument (--data-dir)"
        raw = os.fspath(data_dir)
    else:
        env = os.environ.get(DATA_ENV, "")
        if not env:
            raise DataNotFoundError(
                f"no data directory given: pass --data-dir DIR (data_dir= in Python) or set the "
                f"environment variable {DATA_ENV}=DIR. Expected layout:\n{layout}"
            )
        origin = f"the environment variable {DATA_ENV}"
        raw = env
    path = Path(raw).expanduser()
    if not path.is_dir():
        problem = "is not a directory" if path.exists() else "does not exist"
        raise DataNotFoundError(
            f"data directory {str(path)!r} (from {origin}) {problem}. Expected layout:\n{layout}"
        )
    return path.resolve()


def cache_dir() -> Path:
    """Return the cache directory: ``$FEDPRIVACY_CACHE`` if set, else ``~/.cache/fedprivacy``.

    The directory is not created here.

    Returns
    -------
    pathlib.Path
        The cache directory.
    """
    env = os.environ.get(CACHE_ENV, "")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "fedprivacy"


def _missing_message(path: Path, what: str, url: str | None) -> str:
    where = f" Download it from {url}." if url else ""
    return f"{what} not found: expected the file {str(path)!r}.{where}"


def verify_file(path: Path, expected_sha256: str, *, what: str, url: str | None = None) -> None:
    """Check that ``path`` exists and its SHA-256 equals ``expected_sha256``.

    Parameters
    ----------
    path : pathlib.Path
        The file to check.
    expected_sha256 : str
        Expected hex digest (case-insensitive).
    what : str
        Human description of the file, used in error messages.
    url : str or None
        Where to download the file, named in the message when it is missing; when ``None`` and
        the file name is one of :data:`KNOWN_FILES`, that entry's address is used.

    Raises
    ------
    DataNotFoundError
        If the file does not exist (or is not a regular file).
    ChecksumError
        If its digest differs.
    """
    path = Path(path)
    if url is None:
        url = _url_for_name(path.name)
    if not path.is_file():
        raise DataNotFoundError(_missing_message(path, what, url))
    actual = sha256_file(path)
    if actual != expected_sha256.lower():
        raise ChecksumError(
            f"{what}: checksum mismatch for {str(path)!r}: SHA-256 is {actual}, expected "
            f"{expected_sha256.lower()}. The file is corrupt or not the published version; "
            f"download it again" + (f" from {url}." if url else ".")
        )


def _url_for_name(name: str) -> str | None:
    for known in KNOWN_FILES.values():
        if known.relpath.rsplit("/", 1)[-1] == name:
            return known.url
    return None


def verify_known_file(data_dir: Path, relpath: str) -> Path:
    """Locate a file of :data:`KNOWN_FILES` under ``data_dir`` and check its digests.

    Parameters
    ----------
    data_dir : pathlib.Path
        The data directory (see :func:`resolve_data_dir`).
    relpath : str
        Key of :data:`KNOWN_FILES`, e.g. ``"mnist/train-images-idx3-ubyte.gz"``.

    Returns
    -------
    pathlib.Path
        The verified file.

    Raises
    ------
    DataNotFoundError
        If the file is missing; the message names the file and where to download it.
    ChecksumError
        If none of the published digests of the file matches.
    """
    known = KNOWN_FILES[relpath]
    path = Path(data_dir) / relpath
    if not path.is_file():
        raise DataNotFoundError(_missing_message(path, known.what, known.url))
    checks: list[tuple[str, str, bool, str]] = []
    if known.sha256 is not None:
        checks.append(("sha256", known.sha256, False, "SHA-256"))
    if known.md5 is not None:
        checks.append(("md5", known.md5, False, "MD5"))
    if known.gzip_content_sha256 is not None:
        checks.append(
            ("sha256", known.gzip_content_sha256, True, "SHA-256 of the gunzipped content")
        )
    if not checks:
        raise ValueError(f"KNOWN_FILES[{relpath!r}] lists no digest")
    found: list[str] = []
    for algorithm, expected, gz, label in checks:
        actual = file_digest(path, algorithm, gzip_content=gz)
        if actual == expected.lower():
            return path
        found.append(f"{label} {actual or '(not a valid gzip file)'} (expected {expected.lower()})")
    raise ChecksumError(
        f"{known.what}: checksum mismatch for {str(path)!r}: " + "; ".join(found) + ". The file "
        f"is corrupt or not the published version; download it again from {known.url}."
    )
