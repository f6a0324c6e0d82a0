"""Companion settings per profile (issue 17 point 8) and the person's stored time zone (point 9).

The zone starts as the one the latest slice was opened in, the same clock that named it."""

import django.core.validators
from django.db import migrations, models


def zone_from_latest_slice(apps, schema_editor):
    Profile = apps.get_model("memory", "Profile")
    Slice = apps.get_model("memory", "Slice")
    for profile in Profile.objects.filter(tz=""):
        tz = (
            Slice.objects.filter(profile=profile).exclude(tz="UTC").exclude(tz="")
            .order_by("-started_at").values_list("tz", flat=True).first()
        )
        if tz:
            Profile.objects.filter(pk=profile.pk).update(tz=tz)


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_experience_history_run")]

    operations = [
        migrations.AddField(
            model_name="profile",
            name="model",
            field=models.CharField(blank=True, max_length=200, verbose_name="model"),
        ),
        migrations.AddField(
            model_name="profile",
            name="temperature",
            field=models.FloatField(
                blank=True, null=True, verbose_name="temperature",
                validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(2.0)],
            ),
        ),
        migrations.AddField(
            model_name="profile",
            name="quiet_from",
            field=models.PositiveSmallIntegerField(
                blank=True, null=True, verbose_name="quiet from", validators=[django.core.validators.MaxValueValidator(23)]
            ),
        ),
        migrations.AddField(
            model_name="profile",
            name="quiet_until",
            field=models.PositiveSmallIntegerField(
                blank=True, null=True, verbose_name="quiet until", validators=[django.core.validators.MaxValueValidator(23)]
            ),
        ),
        migrations.AddField(
            model_name="profile",
            name="tz",
            field=models.CharField(blank=True, max_length=64, verbose_name="time zone"),
        ),
        migrations.RunPython(zone_from_latest_slice, migrations.RunPython.noop),
    ]
