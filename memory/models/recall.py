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
    # RecallVector rows of the profile (any model), kept by memory.recall.vectors: with the
    # newest vector's id it tells a process's cached shortlist bits that they changed,
    # without counting the rows on every question.
    n_vectors = models.BigIntegerField(default=0, db_default=0, verbose_name=_("n vectors"))

    class Meta:
        verbose_name = _("recall stats")
        verbose_name_plural = _("recall stats")

    def __str__(self) -> str:
        return f"{self.profile_id}: {self.n_docs} docs"


class BitsField(models.BinaryField):
    """A binary-quantised vector (one bit per dimension, the sign): `bit varying` on
    PostgreSQL, where `bit_count(a # b)` is the Hamming distance; a blob elsewhere."""

    def db_type(self, connection):
        return "bit varying" if connection.vendor == "postgresql" else super().db_type(connection)


class RecallVector(models.Model):
    """A message's sentence vector (SPEC R8), in the same database as the line.

    Written by `memory.recall.vectors` in the archive write's transaction or by
    `manage.py embed_backfill`; removed with the index entry (hide, delete: SPEC D3, D6)
    and by the message's cascade. `model` names the embedder, so vectors of another model
    are never compared with a question's."""

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.CASCADE, related_name="recall_vector", verbose_name=_("message")
    )
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+", verbose_name=_("profile"))
    model = models.CharField(max_length=64, verbose_name=_("model"))
    # Float16 components for the exact re-rank of the Hamming shortlist.
    vector = models.BinaryField(verbose_name=_("vector"))
    bits = BitsField(verbose_name=_("bits"))

    class Meta:
        verbose_name = _("recall vector")
        verbose_name_plural = _("recall vectors")
        # With the message last, the newest vector of a profile is one index seek.
        indexes = [models.Index(fields=["profile", "model", "message"], name="recallvector_profile_model")]

    def __str__(self) -> str:
        return f"vector {self.message_id} ({self.model})"
