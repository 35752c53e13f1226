"""The method-spec table and the family registry."""

from __future__ import annotations

import inspect
import math
from typing import get_args

import numpy as np
import pytest

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.uldp import families
from fedprivacy.uldp.families import (
    FAMILIES,
    MethodFamily,
    SiloLevelFamily,
    UserLevelFamily,
    family_for,
)
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.method_names import METHODS
from fedprivacy.uldp.method_specs import SPECS, Family, MethodSpec, method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper


def parsed(name: str) -> MethodSpec:
    """The name parsing the table replaced."""
    if name == "DEFAULT":
        return MethodSpec(name, "default")
    if name == "ULDP-NAIVE":
        return MethodSpec(name, "naive")
    if name.startswith("ULDP-GROUP-"):
        return MethodSpec(name, "group", group=name.removeprefix("ULDP-GROUP-"))
    family = "avg" if name.startswith("ULDP-AVG") else "sgd"
    suffix = name.split("-")[2] if name.count("-") == 2 else ""
    return MethodSpec(name, family, weighted="w" in suffix, sampled="s" in suffix)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", METHODS)
def test_table_matches_the_names(name: str) -> None:
    assert method_spec(name) == parsed(name)
    assert family_for(name) is FAMILIES[SPECS[name].family]
    assert family_for(name).name == SPECS[name].family


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ParameterError, match="ULDP-AVG-ws"):
        method_spec("ULDP-AVG-x")
    with pytest.raises(ParameterError):
        method_spec(["ULDP-AVG"])  # type: ignore[arg-type]


def test_registry() -> None:
    assert set(FAMILIES) == {s.family for s in SPECS.values()}
    assert all(isinstance(f, MethodFamily) for f in FAMILIES.values())
    assert {n for n, f in FAMILIES.items() if isinstance(f, UserLevelFamily)} == {"avg", "sgd"}
    assert {n for n, f in FAMILIES.items() if isinstance(f, SiloLevelFamily)} == {
        "default",
        "naive",
    }
    assert [n for n, f in FAMILIES.items() if f.per_user] == ["avg", "sgd"]
    with pytest.raises(ParameterError, match="registered already"):
        FAMILIES.register("avg", FAMILIES["avg"])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_entries_are_short(name: str) -> None:
    lines, _ = inspect.getsourcelines(type(FAMILIES[name]))
    assert len(lines) <= 80, f"{name}: {len(lines)} lines"


def test_the_exports_resolve_and_name_every_registered_family() -> None:
    exported = list(families.__all__)
    assert len(set(exported)) == len(exported)
    assert [n for n in exported if not hasattr(families, n)] == []
    # the Family literal, the spec table and the registry agree on the family names
    assert set(get_args(Family)) == set(FAMILIES) == {s.family for s in SPECS.values()}
    for key, family in FAMILIES.items():
        cls = type(family)
        assert family.name == key
        assert cls.__name__ in exported and getattr(families, cls.__name__) is cls
    # every exported class that names a family is the class of a registered family
    named = {
        n
        for n in exported
        if isinstance(obj := getattr(families, n), type)
        and issubclass(obj, MethodFamily)
        and "name" in vars(obj)
    }
    assert named == {type(f).__name__ for f in FAMILIES.values()}


#: One method of each family, and its runner's sampling rate.
_ONE_METHOD = {
    "default": "DEFAULT",
    "naive": "ULDP-NAIVE",
    "group": "ULDP-GROUP-2",
    "avg": "ULDP-AVG-s",
    "sgd": "ULDP-SGD-ws",
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_familys_hooks_do_what_its_flags_declare(heart_fed: Federation, name: str) -> None:
    family = FAMILIES[name]
    method = _ONE_METHOD[name]
    assert family_for(method) is family
    hyper = RoundHyper(
        LocalTrainingSpec(1, 16, 0.05),
        global_lr=1.0,
        clip=0.1,
        noise_multiplier=4.0,
        sampling_rate=0.5,
    )
    runner = MethodRunner(method, heart_fed, hyper)
    flat = flatten_parameters(heart_fed.task.build_model(0))
    rng = np.random.default_rng(0)
    for _ in range(2):
        flat = runner.run_round(flat, rng).flat
    eps = runner.accounting.epsilons(2, np.full(heart_fed.num_users, 2))[0]
    gaussian = (
        PrivacyAccountant("rdp")
        .compose_gaussian(runner.effective_noise_multiplier, 2, runner.sampling_rate)
        .epsilon(runner.delta)
    )
    if family.gaussian_per_round:
        # one Gaussian mechanism of the family's noise multiplier per round, sub-sampled at q
        assert family.noise_multiplier(runner) == runner.effective_noise_multiplier
        assert eps == pytest.approx(gaussian, rel=1e-12)
    elif name == "default":
        assert eps == math.inf
    else:  # the group family accounts per DP-SGD step of the silos, not per round
        assert math.isfinite(eps) and eps != pytest.approx(gaussian, rel=1e-3)
    # per_user: the silos send weighted sums of per-user vectors (the user-level families)
    assert family.per_user == isinstance(family, UserLevelFamily)
    if family.per_user:
        assert hasattr(family, "vectors") and hasattr(family, "loop_vectors")
