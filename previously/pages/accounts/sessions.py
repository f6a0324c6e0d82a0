"""Keeps the list of a person's signed-in sessions current (O5): device, address, last seen,
written at most once a minute per session."""

import time

from memory.accounts import SEEN_EVERY_SECONDS, seen

SEEN_KEY = "_seen"


class SessionSeenMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        session = getattr(request, "session", None)
        if user is not None and user.is_authenticated and session is not None and session.session_key:
            now, key = time.time(), session.session_key
            last = session.get(SEEN_KEY) or ["", 0]
            if last[0] != key or now - last[1] >= SEEN_EVERY_SECONDS:  # a login cycles the key
                session[SEEN_KEY] = [key, now]
                seen(user=user, session_key=key,
                     user_agent=request.META.get("HTTP_USER_AGENT", ""), ip_address=request.META.get("REMOTE_ADDR"))
        return response
