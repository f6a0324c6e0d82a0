"""The admin says, in one line, which of its parts have no translation in the active language
(issue 25 point 7): third-party apps (django-axes, django-tasks-db) ship English only, or
catalogues for other languages, and their labels then stay as they wrote them."""

from functools import cache
from pathlib import Path

from django import template
from django.apps import apps
from django.utils.translation import get_language, gettext, to_locale

register = template.Library()
OURS = {"memory", "previously"}  # translated by the project's own catalogue (LOCALE_PATHS)


@cache
def has_catalogue(app_label: str, language: str) -> bool:
    """Whether the app ships a compiled catalogue for `language` (or its base language)."""
    if language.split("-")[0] == "en":
        return True  # the apps' own text is English
    path = Path(apps.get_app_config(app_label).path) / "locale"
    names = {to_locale(language), to_locale(language.split("-")[0])}
    return any((path / name / "LC_MESSAGES" / "django.mo").exists() for name in names)


def untranslated(app_labels, language: str) -> list[str]:
    """The verbose names of the apps among `app_labels` with no catalogue for `language`."""
    names = []
    for label in dict.fromkeys(app_labels):
        try:
            config = apps.get_app_config(label)
        except LookupError:
            continue
        if config.name.split(".")[0] not in OURS and not has_catalogue(label, language):
            names.append(str(config.verbose_name))
    return names


@register.simple_tag(takes_context=True)
def untranslated_note(context) -> str:
    """One line naming the apps of this admin page that have no translation, or nothing."""
    labels = [a["app_label"] for a in context.get("app_list") or ()]
    if context.get("opts") is not None:
        labels.append(context["opts"].app_label)
    elif context.get("app_label"):
        labels.append(context["app_label"])
    names = untranslated(labels, get_language() or "en")
    if not names:
        return ""
    return gettext("Not translated into this language by its package, so shown in English: %(apps)s.") % {
        "apps": ", ".join(names)}
