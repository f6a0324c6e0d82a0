"""Recall: the tokeniser, the full-text index kept beside the archive, and ranking.

`recall(profile=, query=, now=, exclude_ids=)` is the one entry point the chat uses.
"""


def recall(**kwargs):
    """See memory.recall.rank.recall (imported lazily: the index is imported by the archive)."""
    from memory.recall.rank import recall as _recall

    return _recall(**kwargs)
