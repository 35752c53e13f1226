from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

import pytest

from fedprivacy.config import Config, coerce, flatten_sections, read_toml
from fedprivacy.config_sections import (
    DEFAULT_FAIRNESS_RULE,
    RENAMED_KEYS,
    DataSection,
    DPSection,
    LocalTrainingSection,
    SchemeSection,
    SecAggProtocolSection,
    SecureAggregationSection,
    SelectionSection,
)
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.demo import DemoConfig
from fedprivacy.experiments.inversion_study import InversionStudyConfig
from fedprivacy.experiments.reproduce import parse_experiment
from fedprivacy.experiments.selection_run import SelectionConfig
from fedprivacy.fl.secure_selection import SecureSelectionConfig
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.participation import fairness
from fedprivacy.regression.config import RegressionConfig
from fedprivacy.uldp.config import UldpConfig

# one instance of every configuration class, with values away from the defaults
CONFIGS: list[Config] = [
    TrainConfig(
        dataset="mnist",
        scheme="multiround",
        target_privacy=3,
        fairness=True,
        fairness_rule="authors",
        dropout=0.2,
        local_lr=0.03,
        local_lr_milestones=(400, 800),
        secagg=True,
        secagg_degree=4,
        dp="distributed",
        noise_multiplier=0.8,
        clip=1.0,
        delta=1e-6,
        chunk_size=16,
        data_dir="/data",
    ),
    RegressionConfig(
        clients=4,
        epsilon=2.5,
        estimators=("ols", "ana_fgd"),
        lr=0.25,
        iterations=40,
        dataset="diabetes",
        chunk=8,
        data_dir="/data",
    ),
    UldpConfig(
        dataset="mnist",
        method="ULDP-AVG-ws",
        users=1000,
        silos=5,
        sampling_rate=0.3,
        clip=0.5,
        max_labels_per_user=2,
        secure_weighting=True,
        data_dir="/data",
        creditcard_path="/data/creditcard.csv",
    ),
    SecureSelectionConfig(
        dimension=10, protocol_dropout=0.1, users_per_batch=3, secagg_degree=4, update_clip=0.5
    ),
    SelectionConfig(
        scheme="multiround",
        users=30,
        per_round=6,
        rounds=50,
        target_privacy=3,
        dropout=0.1,
        fairness=True,
        fairness_rule="authors",
    ),
    DemoConfig(
        users=60,
        per_round=6,
        targets=(3, 2),
        metrics_time_limit=5.0,
        fairness_rules=("authors",),
    ),
]
IDS = [type(c).__name__ for c in CONFIGS]


def _local(config: Config) -> set[str]:
    """The fields to_toml leaves out (compare=False)."""
    return {f.name for f in type(config).__dataclass_fields__.values() if not f.compare}


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_every_config_round_trips_through_a_mapping_and_toml(
    config: Config, tmp_path: Path
) -> None:
    cls = type(config)
    data = config.to_dict()
    assert all(v is not None and not isinstance(v, tuple) for v in data.values())
    assert cls.from_mapping(data).to_dict() == data
    assert cls.from_mapping(data) == cls.from_mapping(cls.from_mapping(data).to_dict())
    path = tmp_path / "run.toml"
    path.write_text(config.to_toml())
    back = cls.from_toml(path)
    assert back.to_dict() == {k: v for k, v in data.items() if k not in _local(config)}
    assert tomllib.loads(config.to_toml()) == {
        k: v for k, v in data.items() if k not in _local(config)
    }
    if not isinstance(config, TrainConfig):  # TrainConfig's to_dict resolves the model name
        assert back == config


def test_paths_are_not_part_of_the_run() -> None:
    for config in CONFIGS[:3]:
        assert "data_dir" in _local(config)
        assert "data_dir" not in config.to_toml()
        assert "data_dir" in config.to_dict()
    assert "creditcard_path" not in CONFIGS[2].to_toml()


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_unknown_keys_and_bad_types_are_errors_naming_the_key(config: Config) -> None:
    cls = type(config)
    with pytest.raises(ParameterError, match="unknown key 'colour'; known keys: ") as err:
        cls.from_mapping({**config.to_dict(), "colour": 3})
    assert err.value.name == "config"
    key, value = next((k, v) for k, v in config.to_dict().items() if isinstance(v, int))
    with pytest.raises(ParameterError, match=f"^{key}: must be") as err:
        cls.from_mapping({**config.to_dict(), key: [value]})
    assert err.value.name == key


def test_values_are_coerced_by_field_type() -> None:
    cfg = TrainConfig.from_mapping(
        {
            "local_lr": 1,
            "local-lr-milestones": [3, 5],
            "dropout": "0.25",
            "delta": 1,
            "noise_multiplier": 2,
        }
    )
    assert cfg.local_lr == 1.0 and isinstance(cfg.local_lr, float)
    assert cfg.local_lr_milestones == (3, 5) and cfg.dropout == 0.25
    assert isinstance(cfg.delta, float) and isinstance(cfg.noise_multiplier, float)
    assert TrainConfig.from_mapping({"dropout": "heterogeneous"}).dropout == "heterogeneous"
    assert TrainConfig.from_mapping({"dropout": 0}).dropout == 0.0
    assert RegressionConfig.from_mapping({"estimators": "ols, fgd"}).estimators == ("ols", "fgd")
    assert RegressionConfig.from_mapping({"epsilon": 1}).epsilon == 1.0
    assert UldpConfig.from_mapping({"local-epochs": 3, "clip": 1}).clip == 1.0
    assert DemoConfig.from_mapping({"targets": [2]}).targets == (2,)
    bad = [
        (TrainConfig, {"users": 20.0}, "users: must be an integer, got 20.0"),
        (TrainConfig, {"users": True}, "users: must be an integer, got True"),
        (TrainConfig, {"local_lr": "fast"}, "local_lr: must be a number, got 'fast'"),
        (TrainConfig, {"local_lr": True}, "local_lr: must be a number, got True"),
        (TrainConfig, {"secagg": 1}, "secagg: must be true or false, got 1"),
        (TrainConfig, {"local_lr_milestones": 3}, "local_lr_milestones: must be a list, got 3"),
        (
            TrainConfig,
            {"local_lr_milestones": [1.5]},
            "local_lr_milestones: must be an integer, got 1.5",
        ),
        (TrainConfig, {"dropout": True}, "dropout: must be a string or a number, got True"),
        (TrainConfig, {"target_privacy": "2"}, "target_privacy: must be an integer, got '2'"),
        (UldpConfig, {"clip": "big"}, "clip: must be a number, got 'big'"),
        (UldpConfig, {"dataset": 3}, "dataset: must be a string, got 3"),
        (RegressionConfig, {"estimators": 3}, "estimators: must be a list, got 3"),
        (RegressionConfig, {"estimators": [1]}, "estimators: must be a string, got 1"),
    ]
    for cls, data, message in bad:
        with pytest.raises(ParameterError) as err:
            cls.from_mapping(data)
        assert str(err.value) == message
        assert err.value.name == message.split(":")[0]


def test_none_is_accepted_only_for_optional_fields() -> None:
    assert UldpConfig.from_mapping({"clip": None}).clip is None
    with pytest.raises(ParameterError, match="noise_multiplier: must be a number, got None"):
        UldpConfig.from_mapping({"noise_multiplier": None})


def test_required_fields_must_be_given() -> None:
    with pytest.raises(ParameterError, match="^scheme: is required") as err:
        SelectionConfig.from_mapping({"users": 4, "per_round": 2, "rounds": 3})
    assert err.value.name == "scheme"


@dataclass(frozen=True)
class _Typed(Config):
    mode: Literal["exact", "none"] = "exact"
    pair: tuple[int, float] = (1, 2.0)
    anything: object = None
    path: str | None = field(default=None, compare=False)


def test_literal_fixed_tuple_and_untyped_fields() -> None:
    cfg = _Typed.from_mapping({"mode": "none", "pair": [3, 4], "anything": {1, 2}})
    assert cfg == _Typed("none", (3, 4.0), {1, 2})
    assert isinstance(cfg.pair[1], float)
    with pytest.raises(ParameterError, match="mode: must be one of exact, none; got 'fast'"):
        _Typed.from_mapping({"mode": "fast"})
    with pytest.raises(ParameterError, match="pair: must be a list of 2 values"):
        _Typed.from_mapping({"pair": [1]})
    assert coerce("x", [1, "a"], tuple) == (1, "a")


def test_a_config_must_be_a_dataclass() -> None:
    class NotData(Config):
        pass

    with pytest.raises(TypeError, match="not a dataclass"):
        NotData().to_dict()


# -- sections ---------------------------------------------------------------------------------

SECTIONED = """
seed = 3

[data]
dataset = "digits"
partition = "shards"

[selection]
scheme = "multiround"
target-privacy = 2
users = 8
per_round = 4

[training]
rounds = 3
local_lr = 0.05
local_lr_milestones = [2]

[secagg]
secagg = true
bits = 40
"""


def test_sectioned_toml_is_the_flat_toml(tmp_path: Path) -> None:
    sectioned = tmp_path / "sectioned.toml"
    sectioned.write_text(SECTIONED)
    cfg = TrainConfig.from_toml(sectioned)
    flat = tmp_path / "flat.toml"
    flat.write_text(cfg.to_toml())
    assert "[" not in cfg.to_toml().replace("= [", "")  # to_toml writes the flat form
    assert TrainConfig.from_toml(flat).to_dict() == cfg.to_dict()
    assert (cfg.seed, cfg.dataset, cfg.partition, cfg.target_privacy) == (3, "digits", "shards", 2)
    assert (cfg.local_lr, cfg.local_lr_milestones, cfg.secagg, cfg.bits) == (0.05, (2,), True, 40)
    cfg.validate()


def test_a_key_may_be_given_once_across_sections(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    path.write_text("users = 8\n[selection]\nusers = 9\n")
    with pytest.raises(ParameterError, match="key 'users' in \\[selection\\] is also given at"):
        TrainConfig.from_toml(path)
    with pytest.raises(
        ParameterError, match="'local_lr_decay' in \\[b\\] is also given as 'local-lr-decay' in"
    ):
        TrainConfig.from_mapping({"a": {"local-lr-decay": 0.5}, "b": {"local_lr_decay": 0.5}})
    with pytest.raises(ParameterError, match="'local_epochs' at the top level is also given as "):
        UldpConfig.from_mapping({"local-epochs": 2, "local_epochs": 3})


def test_sections_do_not_nest_and_keys_in_sections_are_checked() -> None:
    with pytest.raises(ParameterError, match="sections do not nest") as err:
        TrainConfig.from_mapping({"training": {"optimiser": {"local_lr": 0.1}}})
    assert err.value.name == "config"
    with pytest.raises(ParameterError, match="unknown key 'learning_rate'"):
        TrainConfig.from_mapping({"training": {"learning_rate": 0.1}})
    with pytest.raises(ParameterError, match="local_lr: must be a number"):
        TrainConfig.from_mapping({"training": {"local_lr": "fast"}})
    assert flatten_sections({}) == {}


def test_an_experiment_base_may_have_sections() -> None:
    text = (
        'title = "tiny"\n[base]\nseed = 1\n[base.selection]\nusers = 8\nper_round = 4\n'
        "[base.training]\nrounds = 3\nlocal_lr = 0.5\n"
        '[[runs]]\nname = "a"\nscheme = "random"\n'
        '[[runs]]\nname = "b"\nscheme = "multiround"\ntarget_privacy = 2\nlocal_lr = 0.25\n'
    )
    exp = parse_experiment("tiny", text)
    a, b = (run.config for run in exp.runs)
    assert (a.seed, a.users, a.per_round, a.rounds, a.local_lr) == (1, 8, 4, 3, 0.5)
    assert (b.scheme, b.target_privacy, b.local_lr) == ("multiround", 2, 0.25)  # runs override


def test_with_settings_and_with_overrides() -> None:
    base = UldpConfig()
    assert base.with_settings({"privacy": {"noise_multiplier": 2}}).noise_multiplier == 2.0
    assert base.with_overrides(users=5, clip=None) == UldpConfig(users=5)
    with pytest.raises(ParameterError, match="unknown key 'learning_rate'"):
        base.with_settings({"learning_rate": 0.1})


# -- one spelling per concept ------------------------------------------------------------------

OLD_SPELLINGS = [
    (UldpConfig, "sigma", 2.0, "noise_multiplier"),
    (TrainConfig, "epochs", 2, "local_epochs"),
    (TrainConfig, "lr", 0.1, "local_lr"),
    (TrainConfig, "lr-decay", 0.5, "local_lr_decay"),
    (TrainConfig, "lr_milestones", [2], "local_lr_milestones"),
    (SecureSelectionConfig, "degree", 4, "secagg_degree"),
    (SecureSelectionConfig, "clip", 1.0, "update_clip"),
    (SecureSelectionConfig, "batch_size", 2, "users_per_batch"),
    (SelectionConfig, "time_limit", 5.0, "metrics_time_limit"),
    (DemoConfig, "time_limit", 5.0, "metrics_time_limit"),
    (InversionStudyConfig, "lr", 0.1, "local_lr"),
]


@pytest.mark.parametrize(("cls", "old", "value", "new"), OLD_SPELLINGS)
def test_an_old_spelling_is_refused_naming_the_new_one(
    cls: type[Config], old: str, value: object, new: str, tmp_path: Path
) -> None:
    message = f"^{old}: is now spelled {new}$"
    with pytest.raises(ParameterError, match=message) as err:
        cls.from_mapping({"section": {old: value}})
    assert err.value.name == old
    path = tmp_path / "old.toml"
    path.write_text(f"{old} = {json.dumps(value)}\n")
    with pytest.raises(ParameterError, match=f"^{path}: {message[1:]}"):  # a file: named
        cls.from_toml(path)


def test_a_field_of_another_concept_keeps_its_name() -> None:
    assert RegressionConfig.from_mapping({"lr": 0.25}).lr == 0.25  # NA-FGD's step, not local SGD
    assert TrainConfig.from_mapping({"clip": 1.0, "batch_size": 8}).batch_size == 8
    assert not (set(RENAMED_KEYS) & set(RENAMED_KEYS.values()))
    both = {
        (type(config).__name__, old)
        for config in CONFIGS
        for old, new in RENAMED_KEYS.items()
        if {old, new} <= {f.name for f in fields(type(config))}
    }
    # DP's clip next to the encoding's update_clip
    assert both == {("TrainConfig", "clip"), ("UldpConfig", "clip")}


SECTIONS = (
    DataSection,
    SelectionSection,
    LocalTrainingSection,
    SecureAggregationSection,
    DPSection,
)


def test_each_shared_field_is_declared_in_one_section() -> None:
    declared = [f for s in SECTIONS for f in s.__annotations__]
    declared += list(SchemeSection.__annotations__) + list(SecAggProtocolSection.__annotations__)
    assert len(declared) == len(set(declared))
    docs = "".join(s.__doc__ or "" for s in (*SECTIONS, SchemeSection, SecAggProtocolSection))
    for name in declared:
        assert f"\n    {name} : " in docs, name
    assert DEFAULT_FAIRNESS_RULE == fairness.DEFAULT_FAIRNESS_RULE


def test_configs_have_their_sections_with_flat_access_and_their_defaults() -> None:
    has = {
        TrainConfig: (DataSection, SelectionSection, LocalTrainingSection),
        UldpConfig: (
            DataSection,
            SchemeSection,
            LocalTrainingSection,
            SecureAggregationSection,
            DPSection,
        ),
        SelectionConfig: (SelectionSection, SecureAggregationSection),
        SecureSelectionConfig: (SecAggProtocolSection,),
        RegressionConfig: (DataSection,),
    }
    for cls, sections in has.items():
        assert all(issubclass(cls, s) for s in sections), cls
    assert not issubclass(UldpConfig, SelectionSection)
    assert UldpConfig().update_clip is None  # the clear sum over silos needs no bound
    train, uldp = TrainConfig(), UldpConfig()
    assert (train.dataset, train.local_epochs, train.batch_policy, train.dp) == (
        "digits",
        1,
        "atomic",
        "none",
    )
    assert (uldp.dataset, uldp.scheme, uldp.noise_multiplier, uldp.local_epochs) == (
        "heart_disease",
        "poisson",
        5.0,
        None,
    )
    assert SelectionConfig("random", 4, 2, 3).batch_policy is None  # the scheme's default
    assert SecureSelectionConfig().batch_policy == "atomic"
    assert [f.name for f in fields(TrainConfig)][:3] == ["dataset", "data_dir", "scheme"]
    assert [f.name for f in fields(SelectionConfig)][:4] == [
        "scheme",
        "users",
        "per_round",
        "rounds",
    ]
    assert TrainConfig(local_lr=0.5, data_dir="/x") == TrainConfig(local_lr=0.5)
    assert TrainConfig(local_lr=0.5).differences(TrainConfig(), ignore=("data_dir",)) == [
        "local_lr"
    ]


# -- files ------------------------------------------------------------------------------------


def test_read_toml_errors_name_config(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = [(tmp_path / "missing.toml", "file not found")]
    bad = tmp_path / "bad.toml"
    bad.write_text("users = [\n")
    cases.append((bad, "is not valid TOML"))
    binary = tmp_path / "binary.toml"
    binary.write_bytes(bytes(range(128, 256)))
    cases.append((binary, "is not a text \\(UTF-8\\) file"))
    cases.append((tmp_path, "cannot read"))
    for path, message in cases:
        for reader in (read_toml, TrainConfig.from_toml, UldpConfig.from_toml):
            with pytest.raises(ParameterError, match=message) as err:
                reader(path)
            assert err.value.name == "config"


def test_every_bundled_config_file_loads() -> None:
    from importlib import resources

    folder = resources.files("fedprivacy.experiments")
    files = [
        p
        for sub in ("configs", "composed")
        for p in (folder / sub).iterdir()
        if p.name.endswith(".toml")
    ]
    assert len(files) >= 10
    for p in files:
        exp = parse_experiment(p.name, p.read_text())
        assert exp.runs


def test_a_stored_configuration_of_an_older_spelling_still_reads() -> None:
    """Our own run directories keep resuming after a rename; a user's file gets the error."""
    from fedprivacy.errors import ParameterError
    from fedprivacy.fl.training_config import TrainConfig
    from fedprivacy.uldp.config import UldpConfig

    old = {"method": "ULDP-AVG", "sigma": 2.0, "local_lr": 0.1}
    assert UldpConfig.from_stored(old) == UldpConfig.from_mapping(
        {"method": "ULDP-AVG", "noise_multiplier": 2.0, "local_lr": 0.1}
    )
    with pytest.raises(ParameterError, match="sigma: is now spelled noise_multiplier"):
        UldpConfig.from_mapping(old)
    train = TrainConfig.from_stored({"epochs": 3, "lr": 0.05, "lr_decay": 0.5})
    assert (train.local_epochs, train.local_lr) == (3, 0.05)
    with pytest.raises(ParameterError, match="unknown key 'nonsense'"):
        TrainConfig.from_stored({"nonsense": 1})
