"""The import graph of ``src/fedprivacy`` has no cycles, counting every import.

Module-level imports, lazy imports inside functions and imports under ``if TYPE_CHECKING:``
all count: a cycle that hides behind a lazy import or a type-only import is still two modules
that each need the other to be read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    known = set(paths)
    return {name: _imported(path, name, known) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 200  # the walk found the package
    assert cycles(graph) == []


def package_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The sub-packages of ``package`` and which of them each one's modules import."""
    packages = {m for m in graph if any(k.startswith(m + ".") for k in graph)}

    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        name = f"{package}.{module[len(package) + 1 :].split('.')[0]}"
        return name if name in packages else None

    out: dict[str, set[str]] = {c: set() for c in map(child, packages) if c is not None}
    for module, imported in graph.items():
        here = child(module)
        if here is not None:
            out[here].update(c for c in map(child, imported) if c not in (None, here))
    return out


def test_no_two_sub_packages_import_each_other() -> None:
    """Layers, not only modules: e.g. flower's messaging < faults < nodes < fedavg < dropin."""
    graph = import_graph()
    packages = sorted({m for m in graph if any(k.startswith(m + ".") for k in graph)})
    assert "fedprivacy.flower" in packages and len(package_graph(graph, "fedprivacy.flower")) == 7
    for package in packages:
        assert cycles(package_graph(graph, package)) == [], package


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set(), "c": {"c"}}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_finds_every_cycle(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert sorted(cycles(graph)) == expected


def test_typing_only_and_lazy_imports_count(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from fedprivacy.x import A\n"
        "def f():\n    from fedprivacy.y import B\n"
    )
    tree_file = tmp_path / "z.py"
    tree_file.write_text(source)
    known = {"fedprivacy.x", "fedprivacy.y", "fedprivacy.z"}
    assert _imported(tree_file, "fedprivacy.z", known) == {"fedprivacy.x", "fedprivacy.y"}


def test_a_cycle_between_sub_packages_is_seen_without_a_module_cycle() -> None:
    graph = {"p": set(), "p.a": set(), "p.b": set()}
    graph |= {"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()}
    assert cycles(graph) == []  # x -> y -> z: no module imports itself back
    assert cycles(package_graph(graph, "p")) == [["p.a", "p.b"]]
