from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Error, register

from previously.tunables import TUNABLES

UNSET = object()


@register()
def check_tunables(app_configs, **kwargs) -> list[Error]:
    """Name every tunable whose value is not what its entry in previously/tunables.py expects
    (`manage.py check`, and every command that starts the server or migrates, STYLE 11)."""
    errors = []
    for name, tunable in TUNABLES.items():
        value = getattr(settings, name, UNSET)
        expected = tunable.problem(value) if value is not UNSET else None
        if expected:
            errors.append(
                Error(
                    f"{name}={value!r}: expected {expected}.",
                    hint=f"Fix the environment variable {name}, or unset it for the default"
                    f" ({tunable.as_environment(tunable.default)}).",
                    id="previously.E001",
                )
            )
    return errors


class PreviouslyConfig(AppConfig):
    name = "previously"
    verbose_name = "Previously"
