"""Every time on every page in the person's own zone (issue 17 point 9, R7): the zone the
browser last sent with a message, kept on the profile when a slice opens — the same clock
that names slices — activated for the request, so `{{ when|date }}`, `|time` and the
template filters all speak it."""

from django.utils import timezone

from memory.clock import is_zone, zone_named
from memory.models import Profile
from memory.models.archive import DEFAULT_PROFILE_KEY
from previously.pages.current_profile import SESSION_KEY


def person_zone(request) -> str | None:
    """The zone of the page's profile (?profile=, else the session's, else `owner`), else of
    any of the user's profiles that has one; None when none does."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    zones = dict(Profile.objects.for_user(user).exclude(tz="").values_list("key", "tz"))
    if not zones:
        return None
    key = request.GET.get("profile") or request.session.get(SESSION_KEY) or DEFAULT_PROFILE_KEY
    for tz in (zones.get(key), *sorted(zones.values())):
        if is_zone(tz):
            return tz
    return None


class PersonZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        tz = person_zone(request)
        if tz:
            timezone.activate(zone_named(tz))
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
