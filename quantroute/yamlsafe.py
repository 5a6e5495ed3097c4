"""Bounded YAML: every policy (and fleet) text goes through here before any data is built from it.

PyYAML composes a node tree in time linear in the text, but building data from it expands every alias: a few
hundred bytes of nested aliases ("billion laughs") become billions of list items and hang the process. So the
text is size-limited, the composed tree is measured as it would expand (each node counted once per path that
reaches it, memoized, so measuring is linear too) and refused when it is too large, too deep or recursive,
and only then constructed."""

from __future__ import annotations

from typing import Any

import yaml

MAX_BYTES = 1 << 20  # a policy with hundreds of rules is ~100 KB
MAX_NODES = 200_000  # after alias expansion
MAX_DEPTH = 64


class YAMLLimitError(yaml.YAMLError):
    """The text is larger, deeper or expands further than any policy needs; nothing was built."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _measure(root: yaml.Node, max_nodes: int, max_depth: int) -> None:
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if depth > max_depth:
            raise YAMLLimitError(f"nested deeper than {max_depth} levels")
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise YAMLLimitError("a recursive alias (a node that contains itself)")
        open_.add(key)
        n = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [c for pair in node.value for c in pair]
        else:
            children = []
        for child in children:
            n += size(child, depth + 1)
            if n > max_nodes:
                raise YAMLLimitError(f"expands to more than {max_nodes} values (aliases included)")
        open_.discard(key)
        sizes[key] = n
        return n

    size(root, 0)


def compose(text: str, *, max_bytes: int = MAX_BYTES, max_nodes: int = MAX_NODES,
            max_depth: int = MAX_DEPTH) -> tuple[yaml.Node | None, Any]:
    """(node tree, data) of one YAML document, within the limits; raises yaml.YAMLError (YAMLLimitError)."""
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise YAMLLimitError(f"larger than {max_bytes} bytes")
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _measure(root, max_nodes, max_depth)
        return root, loader.construct_document(root)
    finally:
        loader.dispose()


def safe_load(text: str, **limits: int) -> Any:
    """yaml.safe_load within the limits."""
    return compose(text, **limits)[1]
