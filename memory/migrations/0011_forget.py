from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0010_companion_settings"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="evolutionrun", name="evolution_trigger_valid"),
        migrations.AlterField(
            model_name="evolutionrun",
            name="trigger",
            field=models.CharField(
                choices=[
                    ("slice_close", "slice close"),
                    ("explicit", "explicit request"),
                    ("migration", "format migration"),
                    ("manual", "manual"),
                    ("forget", "removed with a deleted line"),
                    ("hand_edit", "edited by hand"),
                ],
                max_length=12,
                verbose_name="trigger",
            ),
        ),
        migrations.AddConstraint(
            model_name="evolutionrun",
            constraint=models.CheckConstraint(
                condition=models.Q(("trigger__in", ["slice_close", "explicit", "migration", "manual", "forget", "hand_edit"])),
                name="evolution_trigger_valid",
            ),
        ),
        migrations.AddField(
            model_name='experience',
            name='reviewed_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='reviewed at'),
        ),
        migrations.AddField(
            model_name='highlight',
            name='reviewed_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='reviewed at'),
        ),
        migrations.AddField(
            model_name='message',
            name='reviewed_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='reviewed at'),
        ),
        migrations.AddField(
            model_name='relation',
            name='reviewed_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='reviewed at'),
        ),
    ]
