"""The import graph of a package, read from its source (nothing is imported).

Every ``import`` and ``from ... import`` of a file counts, at any depth: inside functions, under
``if TYPE_CHECKING:``, in ``try`` blocks. An import a function makes at call time ties the two
modules together as firmly as one at the top of the file does, so the layout checks see both.

A registry entry names its code as a string, ``"package.module:attribute"``, that
``<package>.config.registry.load`` imports when the entry is used (the registries sit below the
code they name): a module that imports that loader imports, besides what it writes, every module
named by an entry of the modules it imports (:func:`registry_imports`).

Used by ``test_layout.py`` (cycles, layers) and ``test_dvc_deps.py`` (what each stage runs).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence


@dataclass(frozen=True)
class Graph:
    """The modules of ``package`` (dotted name -> file) and what each imports of it."""

    package: str
    files: dict[str, Path]
    imports: dict[str, frozenset[str]]


def module_name(path: Path, src: Path) -> str:
    """``src/pkg/a/b.py`` -> ``pkg.a.b``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a ``from`` import reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def file_imports(path: Path, name: str, files: dict[str, Path]) -> set[str]:
    """The modules of ``files`` that the file ``path`` (module ``name``) imports: for
    ``from a import b`` the module ``a.b`` when there is one, else ``a``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = resolve(node, name, path.name == "__init__.py")
            found.update(f"{source}.{a.name}" if f"{source}.{a.name}" in files else source
                         for a in node.names)
    return {module for module in found if module in files}


REFERENCE = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")
LOADER = "config.registry"      # the module of ``load``, below the package


def references(path: Path, files: dict[str, Path]) -> set[str]:
    """The modules of ``files`` that registry entries in ``path`` name: string constants
    ``"module:attribute"``."""
    return {match.group(1) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (match := REFERENCE.fullmatch(node.value)) and match.group(1) in files}


def registry_imports(imports: dict[str, set[str]], named: dict[str, set[str]], loader: str
                     ) -> dict[str, set[str]]:
    """``imports`` with, for every module that imports ``loader``, the modules named (``named``)
    by the modules it imports."""
    return {module: deps | {target for dep in deps for target in named[dep]}
                    if loader in deps else deps
            for module, deps in imports.items()}


def read_graph(src: Path, package: str) -> Graph:
    """The import graph of ``src/<package>`` (every ``.py`` file below it), registry entries
    included."""
    files = {module_name(p, src): p for p in sorted((src / package).rglob("*.py"))}
    imports = {name: file_imports(path, name, files) for name, path in files.items()}
    named = {name: references(path, files) for name, path in files.items()}
    imports = registry_imports(imports, named, f"{package}.{LOADER}")
    return Graph(package, files, {name: frozenset(deps) for name, deps in imports.items()})


def cycles(graph: Graph) -> list[list[str]]:
    """Every import cycle: the strongly connected components of more than one module, and a
    module that imports itself (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph.imports:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.imports[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.imports[node]:
                    found.append(sorted(component))
    return sorted(found)


def unit(module: str, package: str) -> str:
    """The top-level package or module of ``package`` that ``module`` belongs to:
    ``rnnsearch.training.run`` -> ``training``, ``rnnsearch.tracking`` -> ``tracking``."""
    return module.removeprefix(package).lstrip(".").split(".")[0]


def layer_problems(graph: Graph, layers: Sequence[Sequence[str]]) -> list[str]:
    """What breaks the layer order ``layers`` (lowest first): a module that imports a unit of
    its own layer or of a layer above it, and a unit placed in no layer."""
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    problems = set()
    for module, imported in graph.imports.items():
        mine = unit(module, graph.package)
        for target in imported:
            theirs = unit(target, graph.package)
            if not mine or not theirs or mine == theirs:
                continue
            for name in (mine, theirs):
                if name not in level:
                    problems.add(f"{graph.package}.{name} is in no layer of the layer order")
            if mine in level and theirs in level and level[theirs] >= level[mine]:
                where = "the same layer as" if level[theirs] == level[mine] else "a layer above"
                problems.add(f"{module} imports {target}: {theirs} is in {where} {mine}")
    return sorted(problems)


def parents(module: str) -> list[str]:
    """The packages Python initialises before ``module``: ``a.b.c`` -> ``a``, ``a.b``."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(graph: Graph, start: Iterable[str]) -> set[str]:
    """Every module that importing ``start`` can run: their imports, transitively, and the
    ``__init__`` of every package on the way."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen or module not in graph.files:
            continue
        seen.add(module)
        todo += list(graph.imports[module]) + parents(module)
    return seen
