"""Reading YAML and JSON documents that anyone may have written.

A document is refused, with an error naming what is wrong, when it is larger than
:data:`~mlsched.core.limits.MAX_DOCUMENT_BYTES`, not UTF-8, nested deeper than
:data:`MAX_DEPTH`, or when YAML aliases would expand it beyond :data:`MAX_NODES` nodes (a
few hundred bytes of anchors can stand for billions of nodes; PyYAML shares them, but
everything that walks the result, from validation to an error message, pays for each).
Recursive aliases are refused outright.
"""

from __future__ import annotations

import json
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_DEPTH, MAX_DOCUMENT_NODES

__all__ = ["MAX_DEPTH", "MAX_NODES", "decode", "load_document"]

MAX_DEPTH = MAX_DOCUMENT_DEPTH
MAX_NODES = MAX_DOCUMENT_NODES


def decode(data: bytes | str, *, where: str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """``data`` as text: at most ``limit`` bytes of UTF-8."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > limit:
        raise SpecError("document", f"{size} bytes", f"at most {limit} bytes", where=where)
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(
            "document",
            f"byte {err.start}: {data[err.start : err.start + 4]!r}",
            "UTF-8 text",
            where=where,
        ) from None


def _json_depth_ok(value: Any) -> bool:
    # json.loads makes exactly dicts and lists; only containers are pushed.
    if type(value) is not dict and type(value) is not list:
        return True
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if children and depth >= MAX_DEPTH:  # a child, container or not, is one deeper
            return False
        stack.extend((v, depth + 1) for v in children if type(v) is dict or type(v) is list)
    return True


def load_document(
    data: bytes | str,
    *,
    where: str,
    json_only: bool = False,
    limit: int = MAX_DOCUMENT_BYTES,
    isolated: bool = False,
) -> Any:
    """Parse a YAML (or JSON: JSON is YAML here, unless ``json_only``) document of at most
    ``limit`` bytes; larger limits allow proportionally more expanded nodes. ``isolated``:
    this process may crash on a hostile document (a worker), so libyaml may be used."""
    text = decode(data, where=where, limit=limit)
    if json_only or text.lstrip()[:1] in ("[", "{"):
        # JSON through the C parser: a megabyte parses in milliseconds, where the YAML
        # loader (pure Python) takes a third of a second of the controller's time. A flow
        # document that is YAML but not JSON ([{job_id: a}]) falls through to YAML.
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            if json_only:
                raise SpecError(
                    "document",
                    f"line {err.lineno} column {err.colno}",
                    f"valid JSON ({err.msg})",
                    where=where,
                ) from None
        except RecursionError:
            raise SpecError(
                "document", "deep nesting", f"at most {MAX_DEPTH} deep", where=where
            ) from None
        else:
            if not _json_depth_ok(value):
                raise SpecError(
                    "document", "deep nesting", f"at most {MAX_DEPTH} deep", where=where
                )
            return value
    from mlsched.core.yaml_loader import load_yaml  # PyYAML loads only for YAML

    return load_yaml(text, where=where, limit=limit, isolated=isolated)
