"""The import graph of a package, read from its source (nothing is imported).

Every import counts, at any depth (a call-time import ties modules as firmly). A registry entry
names its code as ``"package.module:attribute"``, loaded on use, so importing the loader also
imports what the entries of the imported modules name (:func:`registry_imports`), except an
``opaque`` registry's (the architectures, per model stage: :mod:`rnnsearch.stages.model_code`)."""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

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
    """The modules of ``files`` named by registry entries (``"module:attribute"``) in ``path``."""
    return {match.group(1) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (match := REFERENCE.fullmatch(node.value)) and match.group(1) in files}


def registry_imports(imports: dict[str, set[str]], named: dict[str, set[str]], loader: str
                     ) -> dict[str, set[str]]:
    """``imports`` plus, for each module importing ``loader``, what its imports name (``named``)."""
    return {module: deps | {target for dep in deps for target in named[dep]}
                    if loader in deps else deps
            for module, deps in imports.items()}


def read_graph(src: Path, package: str, opaque: Iterable[str] = ()) -> Graph:
    """The import graph of ``src/<package>`` (every ``.py`` below it), registry entries included
    except the ``opaque`` registry modules'."""
    files = {module_name(p, src): p for p in sorted((src / package).rglob("*.py"))}
    imports = {name: file_imports(path, name, files) for name, path in files.items()}
    named = {name: set() if name in opaque else references(path, files)
             for name, path in files.items()}
    imports = registry_imports(imports, named, f"{package}.{LOADER}")
    return Graph(package, files, {name: frozenset(deps) for name, deps in imports.items()})


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


PACKAGE = "rnnsearch"
ARCHITECTURES_MODULE = f"{PACKAGE}.config.architectures"   # the opaque registry (module docstring)
# Modules a stage imports that cannot change what it writes, so that a change to them need not
# rerun it (each says why). Anything else a stage imports belongs in its deps.
CANNOT_CHANGE_A_RESULT = {
    PACKAGE: "the package's docstring and version string only",
    f"{PACKAGE}.tracking": "MLflow: where runs are logged and how they are tagged",
    f"{PACKAGE}.ui_app": "the MLflow UI's web app (tracking imports it for `make ui`)",
    f"{PACKAGE}.environment": "describes the machine a run used; a change alters that "
                              "description in a metrics file, never a number",
    f"{PACKAGE}.procgroup": "process groups: stops a stage's children with it",
    f"{PACKAGE}.command": "how a command ends: the one-line error and its exit status",
    f"{PACKAGE}.allocator": "when the C library hands freed memory back to the operating "
                            "system; every number computed stays the same, bit for bit",
    f"{PACKAGE}.dvc_outputs": "puts a failed stage's previous outputs back, and keeps a copy "
                              "of a successful one's; never computes one",
}


def package_graph(src: Path) -> Graph:
    """The project's import graph, the architectures' registry opaque."""
    return read_graph(src, PACKAGE, opaque={ARCHITECTURES_MODULE})


def code_modules(graph: Graph, start: Iterable[str]) -> set[str]:
    """The modules whose edits can change what running ``start`` writes: their closure less
    :data:`CANNOT_CHANGE_A_RESULT`."""
    return closure(graph, start) - set(CANNOT_CHANGE_A_RESULT)


def _is_docstring(node: ast.stmt) -> bool:
    """A bare string statement: a docstring (of a module, class, function or attribute)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


def code_digest(path: Path) -> str:
    """SHA-256 of a module's syntax tree without docstrings: edits to docstrings, comments or
    layout keep it (the tree's dump may differ between Python versions: an upgrade changes all)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and any(_is_docstring(s) for s in body):
                setattr(node, field, [s for s in body if not _is_docstring(s)] or [ast.Pass()])
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()
