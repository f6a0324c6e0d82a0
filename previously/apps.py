from django.apps import AppConfig


class PreviouslyConfig(AppConfig):
    name = "previously"
    verbose_name = "Previously"
