"""The full-text index over RecallDocument.tokens, per database engine.

SQLite: a contentless FTS5 table keyed by message id, with the profile as a second
column (weight 0 in bm25) so a MATCH stays inside one profile without a scan.
PostgreSQL: a GIN index over the token stream as lexemes (array_to_tsvector keeps
our tokens exactly as the tokeniser made them, whatever the database locale).
"""

from django.db import migrations

SQLITE_UP = (
    "CREATE VIRTUAL TABLE memory_recall_fts USING fts5("
    "tokens, pkey, content='', tokenize='unicode61 remove_diacritics 0')"
)
PG_UP = (
    "CREATE INDEX memory_recall_doc_lexemes ON memory_recalldocument "
    "USING GIN (array_to_tsvector(string_to_array(tokens, ' ')))"
)


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute(SQLITE_UP)
    elif vendor == "postgresql":
        schema_editor.execute(PG_UP)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS memory_recall_fts")
    elif vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS memory_recall_doc_lexemes")


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_recall_document")]
    operations = [migrations.RunPython(forwards, backwards)]
