import json

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from previously.routing import websocket_urlpatterns

FINAL = "outerHTML:#reply-"


def new_mid(n: int) -> str:
    return f"c_{n:016x}"


class Chat:
    """A connected page: send frames, collect what the server answers."""

    def __init__(self, communicator: WebsocketCommunicator):
        self.ws = communicator

    async def send(self, text: str, *, mid: str, tz: str = "Asia/Shanghai", local_time: str | None = None, **extra):
        frame = {"action": "send", "mid": mid, "text": text, "tz": tz, "HEADERS": {"HX-Request": "true"}}
        if local_time:
            frame["local_time"] = local_time
        frame.update(extra)
        await self.ws.send_to(text_data=json.dumps(frame))

    async def frames_until_reply(self, timeout: float = 10) -> list[str]:
        """Frames up to and including the final rendering of the reply."""
        frames = []
        while True:
            frame = await self.ws.receive_from(timeout=timeout)
            frames.append(frame)
            if FINAL in frame:
                return frames

    async def say(self, text: str, *, mid: str, **kwargs) -> list[str]:
        await self.send(text, mid=mid, **kwargs)
        return await self.frames_until_reply()


@pytest.fixture
async def connect():
    """Open chat sockets as a user (the scope user set as AuthMiddlewareStack would); all closed after."""
    opened = []

    async def _connect(user, profile_key: str = "owner"):
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{profile_key}/")
        communicator.scope["user"] = user
        connected, code = await communicator.connect()
        opened.append(communicator)
        return Chat(communicator) if connected else code

    yield _connect
    for communicator in opened:
        await communicator.disconnect()


@pytest.fixture
def profile(user):
    """The user's `owner` profile, in English (Chinese is tested explicitly)."""
    from tests.factories import ProfileFactory

    return ProfileFactory(user=user, key="owner", language="en")


@pytest.fixture(autouse=True)
def _fresh_prefix_cache():
    """Database rows (and their pks) are reused between tests; the per-slice cache is not."""
    from previously.chat import prompt

    prompt._prefix_cache.clear()
    yield
    prompt._prefix_cache.clear()


@pytest.fixture(autouse=True)
def _chat_tests_count_only_chat_requests(settings):
    """These tests script the model's replies turn by turn; the model's look at each turn
    (K10, tested in tests/previously/agent/) would take scripted answers meant for replies."""
    settings.PREVIOUSLY_TURN_ANALYZER_MODEL = False
