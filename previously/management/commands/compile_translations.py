"""Compile locale/*/LC_MESSAGES/django.po to .mo without the gettext tools."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from previously.i18n import compile_all


class Command(BaseCommand):
    help = "Compile the project's translation catalogues (pure Python; no gettext binaries needed)."

    def handle(self, *args, **options):
        written = [mo for d in settings.LOCALE_PATHS for mo in compile_all(d)]
        if not written:
            raise CommandError(f"no django.po found under {', '.join(map(str, settings.LOCALE_PATHS))}")
        for mo in written:
            self.stdout.write(f"compiled {mo}")
