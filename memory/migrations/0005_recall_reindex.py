"""Rebuild the recall index (v2 analyser and side data) from the live archive.

Historical Message rows carry every attribute index_messages reads (pk, profile_id,
slice_id, speaker, content, created_at, local_day_key, deleted_at).
"""

from django.db import migrations


def reindex(apps, schema_editor):
    from memory.recall.index import index_messages

    Message = apps.get_model("memory", "Message")
    live = Message.objects.filter(deleted_at__isnull=True).order_by("profile_id", "created_at", "id")
    batch = []
    for message in live.iterator(chunk_size=2000):
        batch.append(message)
        if len(batch) == 2000:
            index_messages(batch)
            batch = []
    index_messages(batch)


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_recall_side_data")]
    operations = [migrations.RunPython(reindex, migrations.RunPython.noop)]
