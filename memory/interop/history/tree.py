"""Message trees (ChatGPT's `mapping`, Open WebUI's `history.messages`): the visible path and
the branches not taken (SPEC H1).

The visible conversation is the path from the current node up its parents to the root,
reversed. A parent chain that loops, or names a node that is not there, is refused by the
reader with `TreeProblem`'s message. Branches are found from the path's nodes: every child
not on the path starts one.
"""

from collections.abc import Callable, Iterator

from django.utils.translation import gettext


class TreeProblem(ValueError):
    pass


def visible_path(current: str, parent_of: Callable[[str], str | None], has: Callable[[str], bool]) -> list[str]:
    """The node ids from the root to `current`."""
    if not has(current):
        raise TreeProblem(gettext("the current node %(node)s is not in the tree") % {"node": repr(current)[:80]})
    path, seen = [], set()
    node: str | None = current
    while node is not None:
        if node in seen:
            raise TreeProblem(gettext("the parents form a loop at node %(node)s") % {"node": repr(node)[:80]})
        seen.add(node)
        path.append(node)
        parent = parent_of(node)
        if parent is not None and not has(parent):
            raise TreeProblem(gettext("node %(node)s names a parent %(parent)s that is not in the tree")
                              % {"node": repr(node)[:80], "parent": repr(parent)[:80]})
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
