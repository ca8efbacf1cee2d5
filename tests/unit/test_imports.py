"""The first-party import graph (afdep/, faults/, hostio/), read with ast:
no module imports itself back through others, and the packages stay apart as
docs/architecture.md's layout says: faults is a generic engine that never
imports afdep, afdep never imports faults, hostio imports neither. The engine
names no afdep string either: a target's words live in its catalog."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PACKAGES = ("hostio", "afdep", "invariants", "faults", "tools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def first_party_sources() -> dict[str, Path]:
    paths = []
    for package in PACKAGES:
        paths += [p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts]
    return {module_name(path): path for path in paths}


def imported_names(name: str, path: Path) -> list[tuple[str, int]]:
    """(dotted name, line) for every import, at any depth (inside functions and
    `if TYPE_CHECKING:` too), relative imports resolved; `from m import x`
    gives `m.x` (the caller keeps it only when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {first-party module it imports: line}. An import names the
    deepest module it reaches; the packages above it are not edges (their
    __init__ runs first, but importing a sibling is no cycle through them)."""
    sources = first_party_sources()
    graph: dict[str, dict[str, int]] = {}
    for name, path in sources.items():
        edges: dict[str, int] = {}
        for dotted, line in imported_names(name, path):
            parts = dotted.split(".")
            target = next(
                (
                    ".".join(parts[:n])
                    for n in range(len(parts), 0, -1)
                    if ".".join(parts[:n]) in sources
                ),
                None,
            )
            if target is not None and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each strongly connected component of more than one module, as one cycle
    through it (Tarjan, then a path back to the component's first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [path_back(graph, set(c), c[0]) for c in components]


def path_back(graph: dict[str, dict[str, int]], members: set[str], start: str) -> list[str]:
    """The shortest import chain from `start` back to itself inside `members`."""
    paths = [[start, nxt] for nxt in sorted(graph[start]) if nxt in members]
    while paths:
        path = paths.pop(0)
        if path[-1] == start:
            return path
        paths += [
            [*path, nxt]
            for nxt in sorted(graph[path[-1]])
            if nxt in members and nxt not in path[1:]
        ]
    raise AssertionError(f"{start} is in a component without a cycle through it")


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "hostio" in graph["faults.pipeline.run"]  # from hostio import ...
    assert (
        "faults.catalog" in graph["faults.generate.site_faults"]
    )  # from faults.catalog import ...
    assert "faults.pipeline.engine" in graph["tools.faults_cli.run"]  # inside a function
    assert set(graph) >= {"afdep", "tools.driver.driver", "faults.report.document", "hostio"}
    reexported = {"hostio.children", "hostio.files", "hostio.machine", "hostio.usage"}
    assert {name for name in graph if name.startswith("hostio.")} == {*reexported, "hostio.guard"}
    assert set(graph["hostio"]) == reexported  # the guard runs as a script, never imported


def test_the_guard_imports_no_first_party_module():
    """It runs isolated (`python -I -S hostio/guard.py`): its own folder is not
    on sys.path, so it could not, and its start is on every run's clock."""
    assert import_graph()["hostio.guard"] == {}


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_a_cycle_is_reported_with_its_modules():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize(
    "importer, forbidden",
    [("faults", ("afdep",)), ("afdep", ("faults",)), ("hostio", ("afdep", "faults"))],
)
def test_the_packages_stay_apart(importer, forbidden):
    graph = import_graph()
    crossing = [
        f"{module_name_path(module)}:{line}: {module} imports {target}"
        for module, edges in graph.items()
        if module.split(".")[0] == importer
        for target, line in edges.items()
        if target.split(".")[0] in forbidden
    ]
    assert not crossing, crossing


def module_name_path(module: str) -> str:
    return str(first_party_sources()[module].relative_to(REPO))


def afdep_words(path: Path) -> set[str]:
    """Names and strings of code (not comments, not docstrings) that say afdep."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words += [] if id(node) in docstrings else [node.value]
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute | ast.FunctionDef | ast.ClassDef | ast.alias):
            words.append(getattr(node, "attr", None) or getattr(node, "name", ""))
        elif isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
    return {word for word in words if "afdep" in word.lower()}


def test_the_engine_names_no_afdep_string():
    found = {}
    for path in sorted((REPO / "faults").rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if words := afdep_words(path):
            found[relative] = sorted(words)
    assert not found, f"afdep's words belong in its catalog: {found}"


def test_the_afdep_word_check_reads_code_not_comments(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""Mentions afdep."""\n# afdep here too\n'
        'def f():\n    """afdep"""\n    return "afdep timeout:", afdep_fault_clock\n'
    )
    assert afdep_words(source) == {"afdep timeout:", "afdep_fault_clock"}
