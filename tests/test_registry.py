"""The one :class:`~fedprivacy._registry.Registry` type, and that every registry of src uses it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from fedprivacy._registry import UNKNOWN, Registry, alternatives
from fedprivacy.errors import ParameterError

SRC = Path(__file__).resolve().parents[1] / "src" / "fedprivacy"

#: Every registry of the package: module -> (name, the parameter its errors name).
REGISTRIES = {
    "fedprivacy.cli.memory": ("ESTIMATORS", "command"),
    "fedprivacy.data.images": ("IMAGE_DATASETS", "dataset"),
    "fedprivacy.data.partition": ("PARTITIONERS", "partition"),
    "fedprivacy.data.regression_data": ("REGRESSION_LOADERS", "dataset"),
    "fedprivacy.data.tabular": ("SILO_LOADERS", "dataset"),
    "fedprivacy.dp.accountants": ("ACCOUNTANTS", "kind"),
    "fedprivacy.dp.noise_modes": ("NOISE_MODES", "noise_mode"),
    "fedprivacy.experiments.catalogue": ("PROGRAMS", "experiment"),
    "fedprivacy.experiments.inversion_study": ("SETUPS", "datasets"),
    "fedprivacy.experiments.regression_study": ("RUNNERS", "name"),
    "fedprivacy.fl.aggregators": ("AGGREGATORS", "aggregator"),
    "fedprivacy.fl.mechanism": ("MECHANISMS", "dp"),
    "fedprivacy.flower.deploy.apps": ("TASKS", "task"),
    "fedprivacy.flower.deploy.deploy_tasks": ("TASKS", "config"),
    "fedprivacy.models.registry": ("REGISTRY", "model"),
    "fedprivacy.participation.fairness": ("FAIRNESS_RULES", "fairness_rule"),
    "fedprivacy.participation.log_formats": ("FORMATS", "format"),
    "fedprivacy.participation.selectors": ("SELECTORS", "scheme"),
    "fedprivacy.uldp.families": ("FAMILIES", "family"),
    "fedprivacy.uldp.tasks": ("PAPER_TASKS", "dataset"),
}


@pytest.fixture
def shapes() -> Registry[int]:
    registry: Registry[int] = Registry("shape")
    registry.register("square", 4)
    registry.register("triangle", 3)
    return registry


def test_register_refuses_duplicates_and_bad_names(shapes: Registry[int]) -> None:
    assert shapes.register("pentagon", 5) == 5
    with pytest.raises(ParameterError, match="'square' is registered already") as info:
        shapes.register("square", 5)
    assert info.value.name == "shape"
    for bad in ("", None, 3):
        with pytest.raises(ParameterError, match="non-empty string"):
            shapes.register(bad, 1)  # type: ignore[arg-type]
    assert dict(shapes) == {"square": 4, "triangle": 3, "pentagon": 5}


def test_register_as_a_decorator() -> None:
    rules: Registry[object] = Registry("rule")

    @rules.register("first")
    def first() -> int:
        return 1

    assert first() == 1 and rules["first"] is first
    with pytest.raises(ParameterError, match="registered already"):
        rules.register("first")


def test_lookup_lists_the_valid_names(shapes: Registry[int]) -> None:
    assert shapes.lookup("triangle") == 3 and shapes["square"] == 4
    for unknown in ("circle", ["square"], None):
        with pytest.raises(ParameterError) as info:
            shapes.lookup(unknown)
        assert info.value.name == "shape"
        assert str(info.value) == f"shape: must be one of square, triangle; got {unknown!r}"
    with pytest.raises(ParameterError, match="^shapes: must be one of square, triangle; got 'x'"):
        shapes.lookup("x", parameter="shapes")
    kinds = Registry[int]("kind", "must be {alternatives}, got {name!r}")
    kinds.register("a", 1)
    kinds.register("b", 2)
    with pytest.raises(ParameterError, match=r"^kind: must be 'a' or 'b', got 'x'$"):
        kinds["x"]
    assert UNKNOWN.format(name="x", names="a, b") == "must be one of a, b; got 'x'"


def test_mapping_protocol(shapes: Registry[int]) -> None:
    assert "square" in shapes and "circle" not in shapes and ["square"] not in shapes
    assert list(shapes) == ["square", "triangle"] == list(shapes.names())
    assert len(shapes) == 2
    assert list(shapes.items()) == [("square", 4), ("triangle", 3)]
    assert list(shapes.values()) == [4, 3]
    assert shapes.get("circle") is None and shapes.get("circle", 0) == 0
    assert shapes.get("square") == 4
    assert shapes == {"square": 4, "triangle": 3}
    assert repr(shapes) == "Registry('shape', ['square', 'triangle'])"


def test_unregister_and_restoring(shapes: Registry[int]) -> None:
    with shapes.restoring() as same:
        assert same is shapes
        shapes.register("circle", 0)
        assert shapes.unregister("square") == 4
        assert list(shapes) == ["triangle", "circle"]
    assert list(shapes) == ["square", "triangle"]
    with pytest.raises(ParameterError, match="must be one of"):
        shapes.unregister("circle")


def test_alternatives() -> None:
    assert alternatives({}) == ""
    assert alternatives(["a"]) == "'a'"
    assert alternatives({"a": 1, "b": 2}) == "'a' or 'b'"
    assert alternatives({"a": 1, "b": 2, "c": 3}) == "'a', 'b' or 'c'"


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, those inside top-level ``for`` / ``if`` / ``with`` included."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.For | ast.If | ast.With | ast.Try):
            todo.extend(node.body + getattr(node, "orelse", []))
    return out


def test_every_registry_is_a_registry_instance() -> None:
    """The inventory: each module-level ``Registry(...)`` of src, and nothing else."""
    found = {}
    for module, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Call):
                if ast.unparse(node.value.func) == "Registry":
                    target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                    found[module] = ast.unparse(target)
    assert found == {module: name for module, (name, _) in REGISTRIES.items()}
    for module, (name, parameter) in REGISTRIES.items():
        registry = getattr(importlib.import_module(module), name)
        assert isinstance(registry, Registry) and registry.parameter == parameter
        assert len(registry) >= 2, f"{module}.{name} is empty"


def test_no_module_keeps_a_private_registry() -> None:
    """No ``def register*`` outside ``_registry.py``, and no table filled at import time.

    A name registry by hand is a module-level dict or list that the module (or a ``register``
    function) fills after creating it: ``TABLE[name] = item``, ``TABLE.append(item)`` or
    ``TABLE.update(...)`` at module level. Every such table must be a :class:`Registry`.
    """
    offences = []
    for module, tree in _modules().items():
        if module == "fedprivacy._registry":
            continue
        for node in _top_level(tree):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_").startswith("register"):
                offences.append(f"{module}: def {node.name}")
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Subscript) for t in targets):
                    offences.append(f"{module}: {ast.unparse(node).splitlines()[0]}")
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Attribute) and func.attr in {"append", "update"}:
                    offences.append(f"{module}: {ast.unparse(node).splitlines()[0]}")
    assert offences == []
