"""Logins behind a proxy (SPEC S3, issue 24 point 8).

`client_address(request)`: the address django-axes locks on (AXES_CLIENT_IP_CALLABLE). Only
when the connection comes from one of `DJANGO_TRUSTED_PROXIES` (addresses or networks) is
`X-Forwarded-For` read, right to left, skipping the trusted proxies: the first address no
proxy of ours vouches for is the client's. A client talking to the server directly cannot
choose its address by sending the header; behind the proxy, each person has their own.

`LoginThrottle`: failed logins per client address, whatever the username (unknown names
included). Past PREVIOUSLY_LOGIN_ADDRESS_FAILURES in PREVIOUSLY_LOGIN_ADDRESS_WINDOW_SECONDS a
login POST from that address is answered 429 at once: no password hashed, no row written, so
a loop of guesses cannot slow the server for everyone else. Password reset requests from one
address are limited by the same numbers (each may send a mail). Counted in Django's cache (per
process with the default cache).
"""

import ipaddress
from functools import cache

from django.conf import settings
from django.core.cache import cache as shared
from django.shortcuts import render
from django.urls import reverse


@cache
def _trusted_networks(proxies: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _address(text: str):
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address) -> bool:
    networks = _trusted_networks(tuple(settings.TRUSTED_PROXIES))
    return address is not None and any(address in network for network in networks)


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or behind a trusted proxy the address it forwarded."""
    remote = request.META.get("REMOTE_ADDR", "")
    if not settings.TRUSTED_PROXIES or not _trusted(_address(remote)):
        return remote
    hops = [h for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return remote  # a hop no proxy of ours wrote: the nearest one we trust stands for it
        if not _trusted(address):
            return str(address)
    return str(_address(hops[0])) if hops else remote


def _key(kind: str, address: str) -> str:
    return f"previously:{kind}:{address}"


def _count(key: str, window: int) -> None:
    if not shared.add(key, 1, window):
        try:
            shared.incr(key)
        except ValueError:  # expired in between
            shared.add(key, 1, window)


class LoginThrottle:
    """Refuses login POSTs from an address past its failures (see the module's docstring), and
    password reset requests past as many from one address, each counted whatever its outcome
    since each may send a mail (issue 28 point 4)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method != "POST" or request.path not in (reverse("login"), reverse("password_reset")):
            return self.get_response(request)
        resets = request.path == reverse("password_reset")
        key = _key("password-resets" if resets else "login-failures", client_address(request))
        limit = settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES
        if (shared.get(key) or 0) >= limit:
            return render(request, "registration/throttled.html", {
                "limit": limit, "minutes": max(1, settings.PREVIOUSLY_LOGIN_ADDRESS_WINDOW_SECONDS // 60),
                "resets": resets,
            }, status=429)
        response = self.get_response(request)
        if resets or response.status_code == 200:  # a reset asked for, or the login form again: refused
            _count(key, settings.PREVIOUSLY_LOGIN_ADDRESS_WINDOW_SECONDS)
        return response
