"""Recall v2 (issue 7): per-message side data and per-profile term statistics.

The analyser changed (stop words, stemming) and SQLite's FTS5 table now holds
profile-scoped terms, so the v1 index is emptied here and rebuilt from the archive
in 0005.
"""

import django.db.models.deletion
from django.db import migrations, models

SQLITE_FTS = (
    "CREATE VIRTUAL TABLE memory_recall_fts USING fts5("
    "terms, content='', tokenize='unicode61 remove_diacritics 0')"
)


def drop_v1_index(apps, schema_editor):
    apps.get_model("memory", "RecallDocument").objects.all().delete()
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS memory_recall_fts")


def create_v2_fts(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_FTS)


def drop_v2_fts(apps, schema_editor):
    apps.get_model("memory", "RecallDocument").objects.all().delete()
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS memory_recall_fts")
        schema_editor.execute(
            "CREATE VIRTUAL TABLE memory_recall_fts USING fts5("
            "tokens, pkey, content='', tokenize='unicode61 remove_diacritics 0')"
        )


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_recall_fulltext")]

    operations = [
        migrations.RunPython(drop_v1_index, drop_v2_fts),
        migrations.AddField(
            model_name="recalldocument",
            name="pos",
            field=models.BigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="recalldocument",
            name="slice",
            field=models.ForeignKey(
                default=0,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.slice",
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="recalldocument",
            name="speaker",
            field=models.CharField(default="", max_length=10),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="recalldocument",
            name="day",
            field=models.CharField(blank=True, max_length=10),
        ),
        migrations.AddConstraint(
            model_name="recalldocument",
            constraint=models.UniqueConstraint(
                fields=("profile", "pos"), name="recalldoc_unique_pos_per_profile"
            ),
        ),
        migrations.CreateModel(
            name="RecallTerm",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("term", models.CharField(max_length=64)),
                ("df", models.IntegerField()),
                (
                    "profile",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memory.profile"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("profile", "term"), name="recallterm_unique_per_profile")
                ],
            },
        ),
        migrations.CreateModel(
            name="RecallStats",
            fields=[
                (
                    "profile",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="recall_stats",
                        serialize=False,
                        to="memory.profile",
                    ),
                ),
                ("n_docs", models.IntegerField(default=0)),
                ("n_tokens", models.BigIntegerField(default=0)),
                ("next_pos", models.BigIntegerField(default=0)),
            ],
            options={"verbose_name_plural": "recall stats"},
        ),
        migrations.RunPython(create_v2_fts, migrations.RunPython.noop),
    ]
