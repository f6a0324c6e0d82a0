"""Issue 14: no import cycles in memory/ or previously/, imports inside functions included.

`lint-imports` (pyproject's [tool.importlinter], run by `make lint`) checks the layering
contracts on the import graph; these tests make sure that graph is the whole truth: no import
hides inside a function (where a cycle could be dodged), and no cycle runs through the modules.
"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("memory", "previously")
# Imports allowed inside a function: (path relative to the repository, imported module).
# Each entry needs its reason; none is there to dodge a cycle.
ALLOWED_IN_FUNCTIONS: set[tuple[str, str]] = {
    # A data migration: its module is loaded with every migration, against historical models;
    # the current indexer is reached only when the migration runs (and memory.recall.index
    # never imports a migration, so there is no cycle either way).
    ("memory/migrations/0005_recall_reindex.py", "memory.recall.index"),
}


def _sources() -> dict[str, pathlib.Path]:
    """Module name -> file, for every module of the two packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known) -> list[str]:
    """The modules one import statement imports (relative imports resolved): for
    `from a import b`, `a.b` when that is a module, else `a` (as grimp reads it)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return sorted({f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names})


def _imports_in_functions(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            found += [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
    return found


def test_no_import_hides_inside_a_function():
    offenders = []
    sources = _sources()
    for module, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports_in_functions(tree):
            names = _imported(node, module, path.name == "__init__.py", sources)
            where = str(path.relative_to(ROOT))
            if not all((where, name) in ALLOWED_IN_FUNCTIONS for name in names):
                offenders.append(f"{where}:{node.lineno} imports {', '.join(names)}")
    assert offenders == [], "imports inside functions (move them to the top; a cycle means a layer is wrong):\n" + "\n".join(offenders)


def _graph() -> dict[str, set[str]]:
    """Every import between modules of the two packages, wherever it is written."""
    sources = _sources()
    graph: dict[str, set[str]] = {module: set() for module in sources}
    for module, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(node, module, path.name == "__init__.py", sources):
                    if name in sources and name != module:
                        graph[module].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    assert _cycles(_graph()) == []


def test_the_graph_sees_the_imports():
    graph = _graph()
    assert "memory.card.store" in graph["previously.agent.evolve"]
    assert "previously.push" in graph["previously.agent.events"]


def test_the_layering_contracts_hold():
    """The contracts of pyproject's [tool.importlinter], also in `make test` (so in CI)."""
    lint_imports = pathlib.Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _only_reexports(tree: ast.Module) -> bool:
    """A module whose whole body is imports (and `__all__`), beside its docstring."""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    imports = [n for n in body if isinstance(n, ast.Import | ast.ImportFrom)]
    rest = [n for n in body if n not in imports and not (
        isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])]
    return bool(imports) and not rest


def test_the_reexport_finder_finds_one():
    assert _only_reexports(ast.parse('"""Doc."""\nfrom memory.markers import clean\n__all__ = ["clean"]\n'))
    assert not _only_reexports(ast.parse("from memory.markers import clean\n\ndef f():\n    return clean\n"))


def test_no_module_only_reexports_another():
    """Issue 25 point 8: a module that only re-exports another is a second name for the same
    thing (previously.chat.markers was memory.markers); import the real one. Packages'
    __init__ files may gather their modules' names."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in _sources().values()
        if path.name != "__init__.py" and _only_reexports(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []
