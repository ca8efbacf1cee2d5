"""The first-party import graph (hostio/, afdep/, invariants/, faults/,
tools/), read with ast: no module imports itself back through others, and
the layers hold as docs/architecture.md, "Layers", draws them: hostio <-
afdep <- invariants <- faults <- tools, a lower layer never importing a
higher one, and inside invariants and faults their parts in their order. The
engine (faults, invariants.sync) reaches no afdep module through any chain
and names no afdep string: a target's words live in its catalog."""

from __future__ import annotations

import ast
from pathlib import Path

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
    reexported = {
        "hostio.children",
        "hostio.files",
        "hostio.machine",
        "hostio.pins",
        "hostio.usage",
    }
    scripts = {"hostio.guard", "hostio.serve"}  # run as scripts (a guard, a warm worker)
    assert {name for name in graph if name.startswith("hostio.")} == {*reexported, *scripts}
    assert set(graph["hostio"]) == reexported  # the scripts are never imported


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


# The layers, lowest first (docs/architecture.md, "Layers"): a module imports
# only its own layer and those below it.
LAYERS = ("hostio", "afdep", "invariants", "faults", "tools")
# Inside a layer, its parts, lowest first; parts of one rank stay apart. A
# part is a package, or a module of one named on its own: a concept's
# package keeps a module per stage, and a stage that a lower part needs sits
# below that part (the catalog reads faults/schedules/table.py). A module is
# in the longest part that names it; one outside every part (a package's
# face) may import any part of its layer.
PARTS = {
    "invariants": (("invariants.sync", "invariants.data"),),
    "faults": (
        ("faults.operators",),
        (
            "faults.schedules.table",
            "faults.schedules.ids",
            "faults.schedules.report",
            "faults.shrink.table",
        ),
        ("faults.catalog",),
        ("faults.generate", "faults.schedules.draw"),
        ("faults.schedules.seeds",),
        ("faults.judge",),
        ("faults.pipeline",),
        ("faults.report",),
        ("faults.schedules",),
        ("faults.review",),
        ("faults.corpus", "faults.shrink", "faults.sweep", "faults.amplify", "faults.init"),
        ("faults.pytest_plugin",),
    ),
}
# The doors of `python -m PACKAGE`: each hands over to its command in tools/,
# and is run, never imported.
DOORS = {"faults.__main__": "tools.faults_cli.main"}
# What the engine's layer may reach of afdep's, through any chain: nothing.
# invariants.sync is the engine's; invariants.data reads the kernel package.
AFDEP_FREE = ("faults", "invariants.sync", "hostio")


def layer_of(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def part_of(module: str, parts_of=PARTS) -> tuple[str, int] | None:
    """(the part, its rank in its layer) of `module`, the longest part that
    names it; None outside every part."""
    holding = [
        (part, rank)
        for rank, parts in enumerate(parts_of.get(module.split(".")[0], ()))
        for part in parts
        if module == part or module.startswith(part + ".")
    ]
    return max(holding, key=lambda found: len(found[0]), default=None)


def upward(graph: dict[str, dict[str, int]], path_of=None) -> list[str]:
    """Every import that runs up the layers, or up or across a layer's parts,
    as `path:line: module imports target (why)`."""
    path_of = path_of or module_name_path
    found = []
    for module, edges in graph.items():
        for target, line in edges.items():
            if DOORS.get(module) == target:
                continue
            where = f"{path_of(module)}:{line}: {module} imports {target}"
            if layer_of(target) > layer_of(module):
                found.append(where + " (a higher layer)")
                continue
            if layer_of(target) < layer_of(module):
                continue
            mine, theirs = part_of(module), part_of(target)
            if mine and theirs and mine[0] != theirs[0] and theirs[1] >= mine[1]:
                found.append(where + (" (a higher part)" if theirs[1] > mine[1] else " (a peer)"))
    return sorted(found)


def test_no_import_runs_up_the_layers():
    found = upward(import_graph())
    assert not found, "\n".join(found)


def test_the_layer_rule_names_each_kind_of_wrong_import():
    graph = {
        "afdep.x": {"tools.y": 3},
        "faults.catalog.m": {"faults.pipeline.engine": 4},
        "faults.sweep.a": {"faults.shrink.b": 5},
        "faults.pipeline.engine": {"faults.catalog.m": 6, "hostio": 1},
    }
    assert upward(graph, path_of=lambda module: "x.py") == [
        "x.py:3: afdep.x imports tools.y (a higher layer)",
        "x.py:4: faults.catalog.m imports faults.pipeline.engine (a higher part)",
        "x.py:5: faults.sweep.a imports faults.shrink.b (a peer)",
    ]


def test_a_module_named_on_its_own_is_its_part_not_its_packages():
    parts = {"faults": (("faults.a.table",), ("faults.b",), ("faults.a",))}
    assert part_of("faults.a.table", parts) == ("faults.a.table", 0)
    assert part_of("faults.a.tables", parts) == ("faults.a", 2)
    assert part_of("faults.a", parts) == ("faults.a", 2)
    assert part_of("faults.c", parts) is None


def reached(graph: dict[str, dict[str, int]], start: str) -> dict[str, list[str]]:
    """Every module `start` reaches through imports, with the chain that gets there."""
    chains, todo = {start: [start]}, [start]
    while todo:
        module = todo.pop()
        for target in sorted(graph.get(module, {})):
            if target not in chains and DOORS.get(module) != target:
                chains[target] = [*chains[module], target]
                todo.append(target)
    return chains


def test_the_engine_reaches_no_afdep_module_through_any_chain():
    graph = import_graph()
    found = [
        " -> ".join(chain)
        for module in graph
        if module.startswith(AFDEP_FREE)
        for target, chain in reached(graph, module).items()
        if target.split(".")[0] == "afdep"
    ]
    assert not found, found


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
    engine = [*(REPO / "faults").rglob("*.py"), *(REPO / "invariants" / "sync").rglob("*.py")]
    for path in sorted(engine):
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


FUNCTION_LINES = 60  # a function past this does more than one step


def oversized(paths: list[Path], root: Path) -> list[str]:
    """`path:line: name is N lines` for each function over FUNCTION_LINES
    (paths from `root`). Modules have no cap: one splits where its concept
    does, never to meet a count (issue 51)."""
    found = []
    for absolute in paths:
        text, path = absolute.read_text(), absolute.relative_to(root)
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{path}:{node.lineno}: {node.name} is {length} lines")
    return found


def test_no_function_over_60_lines():
    found = oversized(sorted(first_party_sources().values()), REPO)
    assert not found, found


def test_the_size_rule_names_a_long_function_not_a_long_module(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    module = tmp_path / "m.py"
    module.write_text("def f():\n" + body + "\n" * 340)
    assert oversized([module], tmp_path) == ["m.py:1: f is 61 lines"]


def unmirrored(tests: Path, root: Path) -> list[str]:
    """Each folder under `tests` that names no package folder of `root`
    (tests/unit/faults/pipeline tests faults/pipeline)."""
    return sorted(
        str(folder.relative_to(root))
        for folder in tests.rglob("*")
        if folder.is_dir()
        and folder.name != "__pycache__"
        and not (root / folder.relative_to(tests)).is_dir()
    )


def test_the_unit_tests_mirror_the_packages():
    assert unmirrored(REPO / "tests/unit", REPO) == []
    assert sorted(path.name for path in (REPO / "tests/unit").glob("test_*.py")) == [
        "test_docs.py",
        "test_imports.py",
    ]  # the two that hold the whole repository


def test_the_mirror_rule_names_a_folder_with_no_package(tmp_path):
    (tmp_path / "faults/judge").mkdir(parents=True)
    (tmp_path / "tests/unit/faults/judge").mkdir(parents=True)
    (tmp_path / "tests/unit/faults/verdicts").mkdir(parents=True)
    assert unmirrored(tmp_path / "tests/unit", tmp_path) == ["tests/unit/faults/verdicts"]
