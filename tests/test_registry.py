import pytest

from fedprivacy._registry import UNKNOWN, alternatives, lookup, register
from fedprivacy.errors import ParameterError


def test_register_refuses_duplicates_and_bad_names() -> None:
    registry: dict[str, int] = {}
    assert register(registry, "shape", "square", 4) == 4
    with pytest.raises(ParameterError, match="'square' is registered already") as info:
        register(registry, "shape", "square", 5)
    assert info.value.name == "shape"
    assert registry == {"square": 4}
    for bad in ("", None, 3):
        with pytest.raises(ParameterError, match="non-empty string"):
            register(registry, "shape", bad, 1)  # type: ignore[arg-type]
    assert registry == {"square": 4}


def test_lookup_lists_the_valid_names() -> None:
    registry = {"square": 4, "triangle": 3}
    assert lookup(registry, "shape", "triangle") == 3
    for unknown in ("circle", ["square"], None):
        with pytest.raises(ParameterError) as info:
            lookup(registry, "shape", unknown)
        assert info.value.name == "shape"
        assert str(info.value) == f"shape: must be one of square, triangle; got {unknown!r}"
    with pytest.raises(ParameterError, match=r"^kind: must be 'square' or 'triangle', got 'x'$"):
        lookup(registry, "kind", "x", "must be {alternatives}, got {name!r}")
    assert UNKNOWN.format(name="x", names="a, b") == "must be one of a, b; got 'x'"


def test_alternatives() -> None:
    assert alternatives({}) == ""
    assert alternatives({"a": 1}) == "'a'"
    assert alternatives({"a": 1, "b": 2}) == "'a' or 'b'"
    assert alternatives({"a": 1, "b": 2, "c": 3}) == "'a', 'b' or 'c'"
