"""What every page's navigation needs: the user's companions and which one is current (P2)."""

from django.utils.functional import SimpleLazyObject

from memory.models import Profile
from memory.models.archive import DEFAULT_PROFILE_KEY
from previously.pages.current_profile import SESSION_KEY


def navigation(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        # One query, and only when a page's navigation is rendered.
        "nav_profiles": SimpleLazyObject(
            lambda: list(Profile.objects.for_user(user).order_by("key").only("key", "name"))
        ),
        "nav_profile_key": request.session.get(SESSION_KEY, DEFAULT_PROFILE_KEY),
        "nav_section": section(request),
    }


# Which top-level section a view belongs to, for aria-current in the navigation.
SECTIONS = {
    "home": "chat",
    "archive": "memory",
    "curation": "memory",
    "timeline": "timeline",
    "slice": "timeline",
    "beliefs": "beliefs",
    "card": "beliefs",
    "profiles": "profiles",
    "profile_edit": "settings",
    "profile_delete": "profiles",
    "data": "data",
    "data_import_preview": "data",
    "about": "about",
    "account": "account",
    "password_change": "account",
    "account_delete": "account",
    "people": "account",
    "connections": "connections",
    "connection_edit": "connections",
    "connection_new": "connections",
}


def section(request) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return ""
    return SECTIONS.get(match.namespace or match.url_name or "", "")
