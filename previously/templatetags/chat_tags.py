"""Template filters of the chat page."""

from django import template
from django.utils import timezone

from memory.clock import zone_named
from previously import i18n
from previously.chat.markdown import display_html

register = template.Library()


@register.filter
def local_when(message) -> str:
    """The message's time on the user's clock when it was said (the zone the browser sent with
    it), else in the person's zone: 'YYYY-MM-DD HH:MM'."""
    zone = zone_named(message.tz) or timezone.get_current_timezone()
    return message.created_at.astimezone(zone).strftime("%Y-%m-%d %H:%M")


@register.filter
def interface_language(code: str) -> str:
    """A profile's language as a LANGUAGES code, for `{% language %}`: the chat's own lines
    speak the profile's language whatever the browser asks for."""
    return i18n.interface_language(code)


@register.filter
def markdown(text: str) -> str:
    """U1: a finished reply's Markdown, rendered and sanitised, cached, bounded in size
    (previously/chat/markdown.py)."""
    return display_html(text)
