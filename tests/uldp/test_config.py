from __future__ import annotations

from dataclasses import astuple
from pathlib import Path

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.hyper_defaults import DEFAULT_HYPER
from fedprivacy.uldp.method_names import METHODS


def test_defaults_resolve_per_dataset_and_method() -> None:
    cfg = UldpConfig(dataset="heart_disease", method="ULDP-AVG").validate().resolved()
    d = DEFAULT_HYPER["heart_disease"]["avg"]
    assert (cfg.clip, cfg.global_lr, cfg.local_lr) == (d.clip, d.global_lr, d.local_lr)
    assert (cfg.local_epochs, cfg.batch_size, cfg.silos) == (d.local_epochs, d.batch_size, 4)
    assert cfg.sampling_rate is None
    s = UldpConfig(dataset="mnist", method="ULDP-SGD-ws").resolved()
    assert s.silos == 5 and s.sampling_rate == 0.1
    assert UldpConfig(method="ULDP-AVG-s", sampling_rate=0.3).resolved().sampling_rate == 0.3
    assert UldpConfig(clip=2.0).resolved().clip == 2.0
    for dataset, table in DEFAULT_HYPER.items():
        assert set(table) == {"default", "naive", "group", "avg", "sgd"}, dataset


def test_unknown_method_lists_the_names() -> None:
    with pytest.raises(ParameterError) as err:
        UldpConfig(method="ULDP-MAGIC").validate()
    assert err.value.name == "method"
    for name in METHODS:
        assert name in str(err.value)


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"dataset": "cifar10"}, "dataset"),
        ({"distribution": "pareto"}, "distribution"),
        ({"users": 0}, "users"),
        ({"rounds": 0}, "rounds"),
        ({"silos": 5}, "silos"),  # Heart Disease has 4 fixed silos
        ({"method": "ULDP-AVG", "sampling_rate": 0.5}, "sampling_rate"),
        ({"method": "ULDP-AVG-s", "sampling_rate": 0.0}, "sampling_rate"),
        ({"method": "ULDP-AVG-s", "sampling_rate": 1.5}, "sampling_rate"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"delta": 1.0}, "delta"),
        ({"clip": -1.0}, "clip"),
        ({"local_lr": float("nan")}, "local_lr"),
        ({"local_epochs": 0}, "local_epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"naive_noise": "half"}, "naive_noise"),
        ({"max_labels_per_user": 2}, "max_labels_per_user"),  # MNIST only
        ({"device": "tpu"}, "device"),
        ({"gradient": "loop"}, "gradient"),
        ({"max_rows": 0}, "max_rows"),
        ({"user_alpha": -0.5}, "user_alpha"),
        ({"main_silo_share": 1.5}, "main_silo_share"),
        ({"dp": "laplace"}, "dp"),
        ({"dp": "none"}, "dp"),  # no DP is the DEFAULT method
        ({"method": "ULDP-NAIVE", "dp": "central"}, "dp"),  # adds its own noise
        ({"method": "ULDP-AVG-w", "dp": "central", "secure_weighting": True}, "dp"),
    ],
)
def test_validation_errors(changes: dict[str, object], name: str) -> None:
    with pytest.raises(ParameterError) as err:
        UldpConfig(**changes).validate()  # type: ignore[arg-type]
    assert err.value.name == name


def test_toml_round_trip_and_errors(tmp_path: Path) -> None:
    cfg = UldpConfig(
        dataset="mnist",
        method="ULDP-AVG-ws",
        users=1000,
        silos=5,
        sampling_rate=0.3,
        clip=0.5,
        max_labels_per_user=2,
        data_dir="/somewhere",
    )
    path = tmp_path / "run.toml"
    path.write_text(cfg.to_toml())
    back = UldpConfig.from_toml(path)
    assert back == cfg and back.data_dir is None  # paths are not part of the run
    assert UldpConfig.from_mapping({"local-epochs": 3}).local_epochs == 3
    with pytest.raises(ParameterError, match="^lr: is now spelled local_lr$"):
        UldpConfig.from_mapping({"lr": 0.1})
    with pytest.raises(ParameterError, match="^sigma: is now spelled noise_multiplier$"):
        UldpConfig.from_mapping({"sigma": 5.0})
    with pytest.raises(ParameterError, match="clip"):
        UldpConfig.from_mapping({"clip": "big"})
    with pytest.raises(ParameterError, match="not found"):
        UldpConfig.from_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("users = [")
    with pytest.raises(ParameterError, match="TOML"):
        UldpConfig.from_toml(bad)
    assert cfg.with_overrides(users=5, clip=None).users == 5


# DEFAULT_HYPER as tuned (see its docstring): dataset, family, global_lr, local_lr, clip, Q, B
HYPER_TABLE = """
heart_disease        default  1.0 0.05 1.0  1 4
heart_disease        naive    1.0 0.05 0.1  1 4
heart_disease        group    1.0 0.05 1.0  1 4
heart_disease        avg     20.0 0.05 0.1 10 4
heart_disease        sgd      3.0 0.05 1.0  1 4
tcga_brca            default  1.0 0.01 1.0  1 8
tcga_brca            naive    1.0 0.01 0.1  1 8
tcga_brca            group    1.0 0.01 1.0  1 8
tcga_brca            avg     10.0 0.1  0.5  5 8
tcga_brca            sgd      3.0 0.1  0.5  1 8
mnist                default  1.0 0.05 1.0  1 64
mnist                naive    1.0 0.05 0.5  1 64
mnist                group    1.0 0.05 1.0  1 64
mnist                avg     10.0 0.05 0.5  5 16
mnist                sgd     10.0 0.05 1.0  1 16
creditcard           default  1.0 0.05 1.0  1 64
creditcard           naive    1.0 0.05 0.1  1 64
creditcard           group    1.0 0.05 1.0  1 64
creditcard           avg     10.0 0.05 0.5  5 16
creditcard           sgd     10.0 0.05 1.0  1 16
creditcard-synthetic default  1.0 0.05 1.0  1 64
creditcard-synthetic naive    1.0 0.05 0.1  1 64
creditcard-synthetic group    1.0 0.05 1.0  1 64
creditcard-synthetic avg     10.0 0.05 0.5  5 16
creditcard-synthetic sgd     10.0 0.05 1.0  1 16
"""


def test_default_hyper_values() -> None:
    expected: dict[str, dict[str, tuple[float, float, float, int, int]]] = {}
    for line in HYPER_TABLE.strip().splitlines():
        dataset, family, g, lr, clip, q, b = line.split()
        expected.setdefault(dataset, {})[family] = (
            float(g),
            float(lr),
            float(clip),
            int(q),
            int(b),
        )
    actual = {
        dataset: {family: astuple(h) for family, h in table.items()}
        for dataset, table in DEFAULT_HYPER.items()
    }
    assert actual == expected
