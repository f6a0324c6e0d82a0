"""The recall index's side of the archive: one analysed document per live message,
plus the per-profile statistics the ranking needs (SPEC R2, O2)."""

from django.db import models

from memory.models.archive import Message, Profile, Slice


class RecallDocument(models.Model):
    """The token stream of a message as indexed, with what the rerank reads about it.

    Written and removed only by `memory.recall.index`, in the transaction of the archive
    write or delete, so the index can never return a deleted message (SPEC D3, P0-2).
    """

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.CASCADE, related_name="recall_document"
    )
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    tokens = models.TextField()
    # Order inside the profile's archive (dense per profile, gaps after deletes): neighbours
    # of a hit are found by pos ± 1 with an index seek, never a scan.
    pos = models.BigIntegerField()
    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="+")
    speaker = models.CharField(max_length=10)
    # The user's local day (YYYY-MM-DD) when it was said, for month/year cues in questions.
    day = models.CharField(max_length=10, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "pos"], name="recalldoc_unique_pos_per_profile")
        ]

    def __str__(self) -> str:
        return f"doc {self.message_id}"


class RecallTerm(models.Model):
    """How many of a profile's indexed messages contain a term (its document frequency)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    term = models.CharField(max_length=64)
    df = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "term"], name="recallterm_unique_per_profile")
        ]

    def __str__(self) -> str:
        return f"{self.term}: {self.df}"


class RecallStats(models.Model):
    """A profile's collection statistics: documents, tokens, the next position to hand out."""

    profile = models.OneToOneField(
        Profile, primary_key=True, on_delete=models.CASCADE, related_name="recall_stats"
    )
    n_docs = models.IntegerField(default=0)
    n_tokens = models.BigIntegerField(default=0)
    next_pos = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "recall stats"

    def __str__(self) -> str:
        return f"{self.profile_id}: {self.n_docs} docs"
