"""The method-spec table and the family registry."""

from __future__ import annotations

import inspect

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.uldp import families
from fedprivacy.uldp.families import (
    FAMILIES,
    MethodFamily,
    SiloLevelFamily,
    UserLevelFamily,
    family_for,
    register,
)
from fedprivacy.uldp.method_names import METHODS
from fedprivacy.uldp.method_specs import SPECS, MethodSpec, method_spec


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
    with pytest.raises(ValueError, match="registered already"):
        register(FAMILIES["avg"])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_entries_are_short(name: str) -> None:
    lines, _ = inspect.getsourcelines(type(FAMILIES[name]))
    assert len(lines) <= 80, f"{name}: {len(lines)} lines"
    assert families.__all__  # the package lists its names
