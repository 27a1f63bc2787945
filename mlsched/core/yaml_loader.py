"""The YAML side of :func:`mlsched.core.documents.load_document`: PyYAML's safe loader,
bounded in nesting and in size once aliases are expanded, with YAML 1.2's floats. Kept
apart so that reading JSON (the controller's documents, a cluster file) never imports
PyYAML."""

from __future__ import annotations

import re
from typing import Any

import yaml

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_DOCUMENT_DEPTH as MAX_DEPTH
from mlsched.core.limits import MAX_DOCUMENT_NODES as MAX_NODES

__all__ = ["load_yaml"]


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting while composing, and measures the expanded
    size of the composed graph before any Python object is built from it."""

    max_nodes = MAX_NODES

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(f"line {mark.line + 1}", f"nesting at most {MAX_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, self.max_nodes)
        return node


# YAML 1.1 (PyYAML) reads 1e-5 or 1E3 (no dot) as strings; JSON and YAML 1.2 read numbers,
# and so does every other tool a user writes a job file with. Resolve them as floats.
_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_BoundedLoader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:float"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


_CBoundedLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(yaml.CSafeLoader):
        """libyaml's parser and composer (three times faster), the same resolvers and the
        same expanded-size check. libyaml recurses without a bound on nesting and can
        overflow the C stack on a deeply nested document: use it only in a process whose
        crash refuses the document (the controller's parsing worker)."""

        max_nodes = MAX_NODES

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                _expanded_size(node, self.max_nodes)
            return node

    _CLoader.yaml_implicit_resolvers = _BoundedLoader.yaml_implicit_resolvers
    _CBoundedLoader = _CLoader


class _Refused(Exception):
    def __init__(self, value: str, expected: str) -> None:
        super().__init__(expected)
        self.value, self.expected = value, expected


def _expanded_size(root: Any, max_nodes: int) -> int:
    """Nodes of ``root`` with every alias expanded, computed once per shared node."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Refused("a recursive alias", "a document without self-reference")
        if depth > MAX_DEPTH:  # aliases can nest deeper than the text shows
            raise _Refused("aliases nested deeper", f"nesting at most {MAX_DEPTH} deep")
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        active.discard(key)
        if total > max_nodes:
            raise _Refused(
                f"more than {max_nodes} nodes once aliases are expanded",
                f"at most {max_nodes} nodes (YAML aliases count once per use)",
            )
        sizes[key] = total
        return total

    return size(root, 1)


def load_yaml(text: str, *, where: str, limit: int, isolated: bool) -> Any:
    """``text`` as YAML (see :func:`~mlsched.core.documents.load_document`)."""
    base = _CBoundedLoader if isolated and _CBoundedLoader is not None else _BoundedLoader
    loader = type("_Loader", (base,), {"max_nodes": max(MAX_NODES, limit // 8)})
    try:
        return yaml.load(text, Loader=loader)  # safe: SafeLoader/CSafeLoader subclasses only
    except _Refused as err:
        raise SpecError("document", err.value, err.expected, where=where) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else "?"
        problem = str(getattr(err, "problem", None) or err)[:200]
        raise SpecError("document", at, f"valid YAML or JSON ({problem})", where=where) from None
