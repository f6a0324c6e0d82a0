"""The recall index's side of the archive: one analysed document per live message,
plus the per-profile statistics the ranking needs (SPEC R2, O2)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Message, Profile, Slice


class RecallDocument(models.Model):
    """The token stream of a message as indexed, with what the rerank reads about it.

    Written and removed only by `memory.recall.index`, in the transaction of the archive
    write or delete, so the index can never return a deleted message (SPEC D3, P0-2).
    """

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.CASCADE, related_name="recall_document", verbose_name=_("message")
    )
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+", verbose_name=_("profile"))
    tokens = models.TextField(verbose_name=_("tokens"))
    # Order inside the profile's archive (dense per profile, gaps after deletes): neighbours
    # of a hit are found by pos ± 1 with an index seek, never a scan.
    pos = models.BigIntegerField(verbose_name=_("pos"))
    slice = models.ForeignKey(Slice, on_delete=models.CASCADE, related_name="+", verbose_name=_("slice"))
    speaker = models.CharField(max_length=10, verbose_name=_("speaker"))
    # The user's local day (YYYY-MM-DD) when it was said, for month/year cues in questions.
    day = models.CharField(max_length=10, blank=True, verbose_name=_("day"))

    class Meta:
        verbose_name = _("recall document")
        verbose_name_plural = _("recall documents")
        constraints = [
            models.UniqueConstraint(fields=["profile", "pos"], name="recalldoc_unique_pos_per_profile")
        ]

    def __str__(self) -> str:
        return f"doc {self.message_id}"


class RecallTerm(models.Model):
    """How many of a profile's indexed messages contain a term (its document frequency)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+", verbose_name=_("profile"))
    term = models.CharField(max_length=64, verbose_name=_("term"))
    df = models.IntegerField(verbose_name=_("df"))

    class Meta:
        verbose_name = _("recall term")
        verbose_name_plural = _("recall terms")
        constraints = [
            models.UniqueConstraint(fields=["profile", "term"], name="recallterm_unique_per_profile")
        ]

    def __str__(self) -> str:
        return f"{self.term}: {self.df}"


class RecallStats(models.Model):
    """A profile's collection statistics: documents, tokens, the next position to hand out."""

    profile = models.OneToOneField(
        Profile, primary_key=True, on_delete=models.CASCADE, related_name="recall_stats", verbose_name=_("profile")
    )
    n_docs = models.IntegerField(default=0, verbose_name=_("n docs"))
    n_tokens = models.BigIntegerField(default=0, verbose_name=_("n tokens"))
    next_pos = models.BigIntegerField(default=0, verbose_name=_("next pos"))

    class Meta:
        verbose_name = _("recall stats")
        verbose_name_plural = _("recall stats")

    def __str__(self) -> str:
        return f"{self.profile_id}: {self.n_docs} docs"
