"""Create the first account on first run (`make run`), from the environment or by asking."""

import os
import sys

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Ensure a superuser exists: from DJANGO_SUPERUSER_USERNAME/_PASSWORD when set, "
        "otherwise ask interactively. Does nothing when an account already exists."
    )

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write("Log in with your existing account (reset: manage.py changepassword).")
            return
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME")
        if username and os.environ.get("DJANGO_SUPERUSER_PASSWORD"):
            call_command("createsuperuser", interactive=False, username=username, email="")
            self.stdout.write(f"Created account '{username}' from DJANGO_SUPERUSER_USERNAME.")
        elif sys.stdin.isatty():
            self.stdout.write("First run: create the account you will log in with.")
            call_command("createsuperuser", email="")
        else:
            self.stderr.write(
                "No account exists and no terminal to ask on: set DJANGO_SUPERUSER_USERNAME and "
                "DJANGO_SUPERUSER_PASSWORD, or run 'manage.py createsuperuser'."
            )
