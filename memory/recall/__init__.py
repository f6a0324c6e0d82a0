"""Recall: the tokeniser, the full-text index kept beside the archive, and ranking."""
