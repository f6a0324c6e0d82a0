"""Message trees (ChatGPT's `mapping`, Open WebUI's `history.messages`): the visible path and
the branches not taken (SPEC H1).

The visible conversation is the path from the current node up its parents to the root,
reversed. A parent chain that loops, or names a node that is not there, is refused by the
reader with `TreeProblem`'s message. Branches are found from the path's nodes: every child
not on the path starts one.
"""

from collections.abc import Callable, Iterator


class TreeProblem(ValueError):
    pass


def visible_path(current: str, parent_of: Callable[[str], str | None], has: Callable[[str], bool]) -> list[str]:
    """The node ids from the root to `current`."""
    if not has(current):
        raise TreeProblem(f"the current node {current!r:.80} is not in the tree")
    path, seen = [], set()
    node: str | None = current
    while node is not None:
        if node in seen:
            raise TreeProblem(f"the parents form a loop at node {node!r:.80}")
        seen.add(node)
        path.append(node)
        parent = parent_of(node)
        if parent is not None and not has(parent):
            raise TreeProblem(f"node {node!r:.80} names a parent {parent!r:.80} that is not in the tree")
        node = parent
    path.reverse()
    return path


def branches(path: list[str], children_of: Callable[[str], list[str]], has: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    """(path node, child not on the path) for each branch leaving the path."""
    on_path = set(path)
    for node in path:
        for child in children_of(node):
            if child not in on_path and has(child):
                yield node, child


def subtree(start: str, children_of: Callable[[str], list[str]], has: Callable[[str], bool], seen: set[str]) -> Iterator[str]:
    """Every node under `start` (itself included), each once even if the children loop."""
    stack = [start]
    while stack:
        node = stack.pop()
        if node in seen or not has(node):
            continue
        seen.add(node)
        yield node
        stack.extend(children_of(node))
