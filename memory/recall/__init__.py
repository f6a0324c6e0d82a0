"""Recall: the analyser, the full-text index kept beside the archive, and ranking.

`recall(profile=, query=, now=, exclude_ids=)` is the one entry point the chat uses;
`rank.rank_messages` is the ranking it (and `manage.py retrieve_batch`) relies on.
"""


def recall(**kwargs):
    """See memory.recall.context.recall (imported lazily: the index is imported by the archive)."""
    from memory.recall.context import recall as _recall

    return _recall(**kwargs)
