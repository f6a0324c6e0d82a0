"""Message trees (ChatGPT's `mapping`, Open WebUI's `history.messages`): the visible path and
the branches not taken (SPEC H1).

The visible conversation is the path from the current node up its parents to the root,
reversed. A parent chain that loops, or names a node that is not there, is refused by the
reader with `TreeProblem`'s message. Branches are found from the path's nodes: every child
not on the path starts one.
"""

from collections.abc import Callable, Iterator

from django.utils.translation import gettext

from memory.interop.history.shapes import Alternative, Conversation, Skip


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


def read_tree(conv, nodes: dict[str, dict], current: str, *, parent_key: str, children_key: str, make,
              start, counts=lambda node: True):
    """Fill `conv.lines` from the visible path and keep or count its branches; returns the last
    line's time (or `start`). `make(node, conv, previous time)` is the reader's line of one
    node, or None (it counts what it skips). A regenerated reply — another assistant child of a
    user line that the path answers with an assistant line — becomes that answer's alternative;
    every other node off the path that `counts` is counted as a branch not taken. Raises
    `TreeProblem` for a loop or a missing node."""
    def parent_of(node):
        parent = nodes[node].get(parent_key)
        return parent if isinstance(parent, str) else None

    def children_of(node):
        kids = nodes[node].get(children_key)
        return [k for k in kids if isinstance(k, str)] if isinstance(kids, list) else []

    has = nodes.__contains__
    path = visible_path(current, parent_of, has)
    at = start
    line_at = {}
    for node in path:
        made = make(nodes[node], conv, at)
        if made is not None:
            made.key = node
            at = made.at
            line_at[node] = made
            conv.lines.append(made)
    order = [n for n in path if n in line_at]
    following = {a: line_at[b] for a, b in zip(order, order[1:], strict=False)}
    seen = set(path)

    def count(starts) -> int:
        return sum(1 for s in starts for n in subtree(s, children_of, has, seen) if counts(nodes[n]))

    for parent, child in branches(path, children_of, has):
        if child in seen:
            continue
        user_line, answer = line_at.get(parent), following.get(parent)
        if user_line and user_line.speaker == "user" and answer and answer.speaker == "assistant":
            alt = make(nodes[child], Conversation(app=conv.app, key=conv.key, title=""), answer.at)
            if alt is not None and alt.speaker == "assistant" and alt.text and not alt.images:
                seen.add(child)
                answer.alternatives.append(Alternative(key=child, text=alt.text, at=alt.at))
                conv.skipped[Skip.BRANCH] += count(children_of(child))
                continue
        conv.skipped[Skip.BRANCH] += count([child])
    return at
