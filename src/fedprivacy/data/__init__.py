"""Datasets for the federated-learning experiments: checked loaders and user partitions.

Nothing is downloaded: loaders read a user-supplied data directory (``data_dir`` argument,
``--data-dir`` on the command line, or ``$FEDPRIVACY_DATA``) and verify every file against its
published checksum before reading it.
"""

from fedprivacy.data.digests import sha256_file
from fedprivacy.data.images import (
    DATASETS,
    IMAGE_DATASETS,
    ImageDataset,
    ImageLoader,
    clear_dataset_cache,
    load_dataset,
)
from fedprivacy.data.partition import (
    PARTITIONERS,
    PARTITIONS,
    Partition,
    make_partition,
    partition_data_sharing,
    partition_dirichlet,
    partition_iid,
    partition_shards,
)
from fedprivacy.data.sources import DATA_ENV, resolve_data_dir, verify_file

__all__ = [
    "DATASETS",
    "DATA_ENV",
    "IMAGE_DATASETS",
    "PARTITIONERS",
    "PARTITIONS",
    "ImageDataset",
    "ImageLoader",
    "Partition",
    "clear_dataset_cache",
    "load_dataset",
    "make_partition",
    "partition_data_sharing",
    "partition_dirichlet",
    "partition_iid",
    "partition_shards",
    "resolve_data_dir",
    "sha256_file",
    "verify_file",
]
