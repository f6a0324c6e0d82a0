"""S5 (issue 16 point 6): a websocket is opened only from the site's own origin. Channels'
AllowedHostsOriginValidator (outside this) checks the Origin's host against ALLOWED_HOSTS but
not its scheme or port, so another app on the same host (http://127.0.0.1:9999) got in. Here
the Origin must equal the scheme, host and port the socket was opened on (its Host header;
https when the socket is wss, or when SECURE_PROXY_SSL_HEADER says the proxy took TLS), or
be one of CSRF_TRUSTED_ORIGINS exactly."""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _secure(scope) -> bool:
    if scope.get("scheme") == "wss":
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, expected = proxy
        wanted = header.removeprefix("HTTP_").replace("_", "-").lower().encode()
        return (_header(scope, wanted) or "").split(",")[0].strip() == expected
    return False


def _triple(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port


def same_origin(scope) -> bool:
    origin, host = _header(scope, b"origin"), _header(scope, b"host")
    if not origin or not host:
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parsed = urlsplit(origin)
    if parsed.scheme not in DEFAULT_PORTS or parsed.path not in ("", "/") or parsed.query:
        return False
    expected = _triple("https" if _secure(scope) else "http", host)
    return expected is not None and _triple(parsed.scheme, parsed.netloc) == expected


class SameOriginValidator:
    """ASGI middleware: websockets whose Origin is not the site's own are denied (403)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not same_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
