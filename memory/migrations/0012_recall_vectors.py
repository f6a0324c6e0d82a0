"""Hybrid recall (issue 18, SPEC R8): a sentence vector per message, beside the recall index.

Existing lines get theirs from `manage.py embed_backfill` (bounded, resumable); until then
they are found lexically.
"""

import django.db.models.deletion
from django.db import migrations, models

import memory.models.recall


class Migration(migrations.Migration):
    dependencies = [("memory", "0011_forget")]

    operations = [
        migrations.AddField(
            model_name="recallstats",
            name="n_vectors",
            field=models.BigIntegerField(default=0, db_default=0, verbose_name="n vectors"),
        ),
        migrations.CreateModel(
            name="RecallVector",
            fields=[
                (
                    "message",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="recall_vector",
                        serialize=False,
                        to="memory.message",
                        verbose_name="message",
                    ),
                ),
                ("model", models.CharField(max_length=64, verbose_name="model")),
                ("vector", models.BinaryField(verbose_name="vector")),
                ("bits", memory.models.recall.BitsField(verbose_name="bits")),
                (
                    "profile",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="memory.profile",
                        verbose_name="profile",
                    ),
                ),
            ],
            options={
                "verbose_name": "recall vector",
                "verbose_name_plural": "recall vectors",
                "indexes": [models.Index(fields=["profile", "model", "message"], name="recallvector_profile_model")],
            },
        ),
    ]
