"""Recall: the analyser, the full-text index kept beside the archive, and ranking.

`recall(profile=, query=, now=, exclude_ids=)` is the one entry point the chat uses;
`rank.rank_messages` is the ranking it (and `manage.py retrieve_batch`) relies on.
"""

from memory.recall.context import recall
from memory.recall.review import experiences_for_review

__all__ = ["experiences_for_review", "recall"]
