"""The recall index's side of the archive: one tokenised document per live message."""

from django.db import models

from memory.models.archive import Message, Profile


class RecallDocument(models.Model):
    """The token stream of a message, as indexed (SQLite FTS5 / PostgreSQL GIN over it).

    Written and removed only by `memory.recall.index`, in the transaction of the archive
    write or delete, so the index can never return a deleted message (SPEC D3, P0-2).
    """

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.CASCADE, related_name="recall_document"
    )
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    tokens = models.TextField()

    def __str__(self) -> str:
        return f"doc {self.message_id}"
