"""Which of the user's profiles a page is about (SPEC P2): always one of their own."""

from django.http import Http404

from memory.models import Profile
from memory.models.archive import DEFAULT_PROFILE_KEY, Language

SESSION_KEY = "profile_key"


def current_profile(request) -> Profile:
    """?profile= when given (links to another profile's pages), else the session's, else `owner`;
    the user's `owner` profile is made on first visit, in the browser's language."""
    profiles = Profile.objects.for_user(request.user)
    asked = request.GET.get("profile")
    if asked:
        profile = profiles.filter(key=asked).first()
        if profile is None:
            raise Http404("no such profile")
        return profile
    key = request.session.get(SESSION_KEY)
    profile = profiles.filter(key=key).first() if key else None
    if profile is None:
        profile = profiles.filter(key=DEFAULT_PROFILE_KEY).first() or profiles.order_by("key").first()
    if profile is None:
        # The companion speaks the browser's language when it can (zh-hans -> zh), else English.
        code = (getattr(request, "LANGUAGE_CODE", "") or "").split("-")[0]
        language = code if code in Language.values else Language.EN
        profile, _ = Profile.objects.get_or_create(
            user=request.user, key=DEFAULT_PROFILE_KEY, defaults={"language": language}
        )
    if request.session.get(SESSION_KEY) != profile.key:
        request.session[SESSION_KEY] = profile.key
    return profile
