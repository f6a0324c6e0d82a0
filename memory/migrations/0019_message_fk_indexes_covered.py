"""The message's profile and slice keep their foreign keys but lose the single-column index Django
gives one: four composite indexes lead with them already (`Message.Meta`), and every index is
written per line (issue 24 point 6). Only the two indexes go: `AlterField` would rebuild the
whole message table on SQLite, twice."""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = {"profile": "memory_message_profile_id_27ab803b", "slice": "memory_message_slice_id_04750279"}


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0018_connection_base_url_any_host"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="profile",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="messages", to="memory.profile", verbose_name="profile"),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="slice",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="messages", to="memory.slice", verbose_name="slice"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX "{name}" ON "memory_message" ("{field}_id")',
                )
                for field, name in INDEXES.items()
            ],
        ),
    ]
