"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
# Django must be set up before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from previously.housekeeping import StartsHousekeeping  # noqa: E402
from previously.origins import SameOriginValidator  # noqa: E402
from previously.routing import websocket_urlpatterns  # noqa: E402

application = StartsHousekeeping(
    ProtocolTypeRouter(
        {
            # `make run` is plain Daphne, one process: it serves /static/ itself from the
            # finders; a proxy in front may serve STATIC_ROOT (collectstatic) at scale.
            "http": ASGIStaticFilesHandler(django_asgi_app),
            # The Origin's host must be allowed, and its scheme and port the site's own (S5).
            "websocket": AllowedHostsOriginValidator(
                SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
            ),
        }
    )
)
