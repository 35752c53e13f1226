import numpy as np
import pytest

from fedprivacy.data.silo_dataset import SiloDataset
from fedprivacy.data.tabular import SILO_DATASETS, SILO_LOADERS, load_mnist_pool, load_silo_dataset
from fedprivacy.errors import ParameterError

NEEDED_DATA = ("mnist",)


def _ds(**over):
    x = np.zeros((4, 3), dtype=np.float32)
    fields = dict(
        name="t",
        source="test",
        task="binary",
        silo_names=("a", "b"),
        train_x=(x, x),
        train_y=(np.array([0, 1, 0, 1]), np.array([1, 1, 0, 0])),
        test_x=(x[:2], x[:1]),
        test_y=(np.array([0, 1]), np.array([1])),
        feature_names=("f0", "f1", "f2"),
        num_classes=2,
        fixed_silos=True,
    )
    fields.update(over)
    return SiloDataset(**fields)


def test_validation():
    ds = _ds()
    assert ds.num_silos == 2 and ds.train_sizes().tolist() == [4, 4]
    x, y = ds.pooled_train()
    assert x.shape == (8, 3) and y.tolist() == [0, 1, 0, 1, 1, 1, 0, 0]
    with pytest.raises(ParameterError, match="task"):
        _ds(task="regression")
    with pytest.raises(ParameterError, match="labels must lie"):
        _ds(train_y=(np.array([0, 1, 0, 2]), np.array([1, 1, 0, 0])))
    with pytest.raises(ParameterError, match="feature_names"):
        _ds(feature_names=("f0",))
    with pytest.raises(ParameterError, match="one pseudo-silo"):
        _ds(fixed_silos=False)
    with pytest.raises(ParameterError, match="train_y"):
        _ds(train_y=(np.array([0, 1, 0, 1]),))


def test_unknown_name():
    with pytest.raises(ParameterError) as info:
        load_silo_dataset("cifar10")
    assert "heart_disease" in str(info.value)


def test_mnist_pool_reuses_images(data_dir):
    ds = load_mnist_pool(data_dir)
    assert ds.silo_names == ("pool",) and not ds.fixed_silos
    assert ds.task == "multiclass" and ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    assert ds.train_sizes().tolist() == [60000] and ds.test_sizes().tolist() == [10000]
    x, _ = ds.pooled_train()
    assert x is ds.train_x[0]  # no copy


@pytest.fixture
def saved_silo_loaders():
    with SILO_LOADERS.restoring():
        yield SILO_LOADERS


def test_silo_dataset_registry(saved_silo_loaders, tmp_path):
    assert SILO_DATASETS == tuple(SILO_LOADERS)
    assert SILO_DATASETS == (
        "heart_disease", "tcga_brca", "mnist", "creditcard", "creditcard-synthetic",
    )  # fmt: skip
    with pytest.raises(ParameterError, match="'mnist' is registered already") as info:
        SILO_LOADERS.register("mnist", SILO_LOADERS["heart_disease"])
    assert info.value.name == "dataset"
    calls = []

    def load(data_dir, seed, creditcard_path):
        calls.append((data_dir, seed, creditcard_path))
        return _ds(name="toy")

    assert SILO_LOADERS.register("toy", load) is load
    assert load_silo_dataset("toy", tmp_path, seed=3, creditcard_path="c.csv").name == "toy"
    assert calls == [(tmp_path, 3, "c.csv")]
    with pytest.raises(ParameterError) as info:
        load_silo_dataset("cifar10")
    assert str(info.value) == (
        "dataset: must be one of heart_disease, tcga_brca, mnist, creditcard, "
        "creditcard-synthetic, toy; got 'cifar10'"
    )
