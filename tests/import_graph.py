"""The layout checks of the import graph (:mod:`rnnsearch.code_graph` reads it): cycles and
the layer order. Used by ``test_layout.py`` and ``test_dvc_deps.py``."""
from __future__ import annotations

from typing import Sequence

from rnnsearch.code_graph import Graph, closure, parents, read_graph  # noqa: F401 (re-exported)


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


