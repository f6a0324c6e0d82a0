"""A profile's language as an interface language (issue 14 §4).

A profile stores the language its companion speaks ("zh", "en"); the interface languages are
settings.LANGUAGES ("zh-hans", "en"). Text made for a profile outside the request's own language
(the chat's lines, notices sent over the socket, proactive messages, the arrival briefing) is
rendered with `for_profile(profile)`, or `{% language lang|interface_language %}` in a template,
and the translation catalogues do the rest: no language list lives in code.
"""

from django.conf import settings
from django.utils import translation


def interface_language(code: str | None) -> str:
    """The settings.LANGUAGES entry for a profile language ('zh' -> 'zh-hans'); the active
    language when there is none or it is not offered."""
    if code:
        try:
            return translation.get_supported_language_variant(code)
        except LookupError:
            pass
    return translation.get_language() or settings.LANGUAGE_CODE


def for_profile(profile) -> translation.override:
    """Translate in the profile's language for the duration of a `with` block."""
    return translation.override(interface_language(profile.language))
