"""The server every entry point runs (`make run`, `make scale`, bench.stack, `make hostile`):
Daphne with request bodies bounded before anything parses them (SPEC S4, issue 16 point 1).

Twisted's `Request` buffers the body and, for a form POST, parses all of it in memory before
Daphne or Django see it (`requestReceived` → `parse_qs` / the email parser); a 200 MB multipart
POST to /login/ took the process from 0.3 GB to 2.7 GB. Here:

- Twisted's own form parsing is off (Daphne never reads `request.args`; Django parses the body
  itself, under DATA_UPLOAD_MAX_MEMORY_SIZE / DATA_UPLOAD_MAX_NUMBER_FIELDS);
- the declared `Content-Length` is checked against the route's limit as soon as the headers are
  in, and the bytes actually received (chunked bodies have no declared length) as they arrive;
  either over the limit gets an immediate 413 and the connection is closed, nothing more read;
- bodies of 100 kB and more go to a temporary file as they arrive (Twisted's `_getContentFile`),
  never to memory.

Limits per route (`body_limit`): the data page's import takes PREVIOUSLY_MAX_IMPORT_BYTES, the
chat's image upload PREVIOUSLY_IMAGE_MAX_BYTES, every other route the larger of Django's two
upload sizes; each plus `ENVELOPE_BYTES` for the multipart envelope and the CSRF field.

The import's upload (issue 24 point 1) takes more: a 200 MB body was read back whole into the
application's queue by Daphne (`WebRequest.process` puts every chunk at once), so three
anonymous ones took the process from 376 to 965 MB. On `SIGNED_IN_ROUTES`:
- a request without a session cookie is refused (403) as soon as its headers are in, and one
  whose cookie names no signed-in session once the session store has said so (looked up in a
  thread while the socket is paused, so at most one socket read of the body arrives first);
- a person has at most one such upload in flight per process: a second one gets 429 at once;
- the body, spooled to disk by Twisted as it arrives, is handed to the application from that
  file a chunk at a time as the application reads it (`_BodyFromFile`), never all at once.

The server's event loop is uvloop's (libuv), not asyncio's own: Daphne makes the loop Twisted's
reactor runs on when `daphne.server` is imported, from the policy in force then, so the
policy is set here, before any Daphne import, when this module runs as the server.
Interleaved A/B in `make loadtest`'s one-process scenario at 60 chats (5 pairs, every pair
better): the server's CPU per turn 38.0 -> 33.2 ms, p50 / p99 added first-token delay
48 / 135 -> 35 / 100 ms (BENCH §4). In the two-process PostgreSQL + Redis scenario at
`make loadtest`'s own pace it showed no gain: 5 pairs, p99 163 (asyncio) against 178 ms, CPU
per turn 42.8 against 42.3 ms, within that scenario's noise.

Run as `python -m previously.server [daphne options] previously.asgi:application`.
"""

import asyncio
import gc
import os
import sys
from functools import partial
from importlib import import_module

import uvloop

if __name__ == "__main__":  # the server's own process; a test importing this module keeps its loop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # before Daphne makes its loop (above)

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.db import close_old_connections
from django.urls import Resolver404, resolve
from twisted.internet.threads import deferToThread

from memory import server_lock

# Seconds a thread may hold the GIL while another waits for it (Python's default: 0.005).
SWITCH_INTERVAL = 0.001

# Room above a route's file limit for the multipart boundaries, part headers and CSRF token.
ENVELOPE_BYTES = 64 * 1024

# URL names whose views take an upload, and the setting that bounds the file.
UPLOAD_ROUTES = {
    "data_import_preview": "PREVIOUSLY_MAX_IMPORT_BYTES",
    "data_history_preview": "PREVIOUSLY_MAX_IMPORT_BYTES",
    "chat_image_upload": "PREVIOUSLY_IMAGE_MAX_BYTES",
    "profile_card_import": "PREVIOUSLY_IMAGE_MAX_BYTES",  # a character card (H2)
}

# URL names whose body is read only for a signed-in person, one upload per person at a time.
SIGNED_IN_ROUTES = {"data_import_preview", "data_history_preview"}
# Bytes handed to the application per read of a body spooled to disk (`_BodyFromFile`).
BODY_CHUNK = 64 * 1024
# Who has a signed-in upload in flight in this process (user ids as the session stores them).
UPLOADING: set[str] = set()

REFUSAL = (
    b"HTTP/1.1 %d %s\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\n"
    b"Connection: close\r\n\r\n%s"
)


def route_name(path: bytes) -> str | None:
    """The URL name of the route at `path` (the raw request target), or None."""
    try:
        return resolve(path.split(b"?", 1)[0].decode("latin-1")).url_name
    except Resolver404:
        return None


def body_limit(path: bytes) -> int:
    """The largest request body, in bytes, the route at `path` (the raw request target) takes."""
    form = max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, settings.FILE_UPLOAD_MAX_MEMORY_SIZE or 0)
    setting = UPLOAD_ROUTES.get(route_name(path))
    return (getattr(settings, setting) if setting else form) + ENVELOPE_BYTES


def session_user(session_key: str) -> str | None:
    """The id of the person signed in with this session key, or None (no such session, expired,
    signed out). Runs in a thread: the session store may be the database."""
    try:
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        user_id = store.get(SESSION_KEY)
        return None if user_id is None else str(user_id)
    finally:
        close_old_connections()


class BoundedRequest(WebRequest):
    """Daphne's request, with the body bounded as it arrives and never parsed by Twisted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False
        self._body_limit = 0
        self._body_received = 0
        self._refused = False
        self._checking = False  # the session is being looked up; the socket is paused
        self._received = None  # requestReceived's arguments, held while the session is looked up
        self.uploader: str | None = None  # the signed-in person whose upload this is

    def gotLength(self, length):
        # Called once the headers (and cookies) are in; the request line's target is still only on the channel.
        path = getattr(self.channel, "_path", b"/")
        self._body_limit = body_limit(path)
        if length is not None and length > self._body_limit:
            self._refuse(f"declared {length:,} bytes")
            length = 0  # an empty in-memory buffer: nothing of the body is kept
        elif length != 0 and route_name(path) in SIGNED_IN_ROUTES:
            key = self.received_cookies.get(settings.SESSION_COOKIE_NAME.encode())
            if not key:
                self._refuse("not signed in", status=403, reason=b"Forbidden", text=SIGN_IN)
                length = 0
            else:
                self._check_session(key.decode("latin-1"))
        super().gotLength(length)

    def _check_session(self, key: str) -> None:
        self._checking = True
        self._pause(True)
        deferToThread(session_user, key).addCallbacks(self._signed_in, self._session_failed)

    def _session_failed(self, failure) -> None:
        self._checking = False
        self._refuse("session lookup failed", status=503, reason=b"Service Unavailable",
                     text="The upload could not be checked; try again in a moment.")

    def _signed_in(self, user_id: str | None) -> None:
        self._checking = False
        if self._refused or self.channel is None:
            return
        if user_id is None:
            self._refuse("not signed in", status=403, reason=b"Forbidden", text=SIGN_IN)
            return
        if user_id in UPLOADING:
            self._refuse("one upload at a time", status=429, reason=b"Too Many Requests",
                         text="Your previous upload is still being read; one upload at a time.")
            return
        UPLOADING.add(user_id)
        self.uploader = user_id
        self.notifyFinish().addBoth(lambda _: UPLOADING.discard(user_id))
        if self._received is None:
            self._pause(False)  # the rest of the body
        else:  # all of it is in already (Twisted's channel keeps the socket paused until it answers)
            received, self._received = self._received, None
            super().requestReceived(*received)

    def _pause(self, paused: bool) -> None:
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None:
            (transport.pauseProducing if paused else transport.resumeProducing)()

    def handleContentChunk(self, data):
        if self._refused:
            return
        self._body_received += len(data)
        if self._body_received > self._body_limit:
            self._refuse(f"more than {self._body_limit:,} bytes sent")
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        if self._refused:
            return
        if self._checking:
            self._received = (command, path, version)  # the body is all in; the session not yet
            return
        super().requestReceived(command, path, version)

    def body_file(self) -> int | None:
        """The file descriptor of the body Twisted spooled to disk, or None (in memory)."""
        try:
            return self.content.fileno()
        except (AttributeError, OSError, ValueError):
            return None

    def _refuse(self, what: str, *, status: int = 413, reason: bytes = b"Content Too Large", text: str = "") -> None:
        self._refused = True
        self._checking = False
        body = (text or (
            f"Request body too large for this address ({what}; the limit is {self._body_limit:,} bytes)."
        )).encode() + b"\n"
        channel = self.channel
        transport = channel.transport if channel is not None else None
        if transport is not None:
            transport.write(REFUSAL % (status, reason, len(body), body))
        if channel is not None:
            channel.loseConnection()


SIGN_IN = "Sign in first: this address takes uploads only from a signed-in person."


class _BodyFromFile(asyncio.Queue):
    """An application's input queue that hands it the request body from the file Twisted spooled
    it to, `BODY_CHUNK` bytes per read, as the application asks (issue 24 point 1). Daphne's
    own `http.request` messages (the whole body at once) are dropped; its other messages (the
    disconnect) queue as usual, after the body."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd: int | None = os.dup(fd)  # ours: read by offset, open until the body is handed over
        self._offset = 0

    def put_nowait(self, item):
        if item.get("type") != "http.request":
            super().put_nowait(item)

    async def get(self):
        if self._fd is None:
            return await super().get()
        await asyncio.sleep(0)  # another request's turn between two chunks
        chunk = os.pread(self._fd, BODY_CHUNK, self._offset)
        self._offset += len(chunk)
        more = len(chunk) == BODY_CHUNK
        if not more:
            self.close()
        return {"type": "http.request", "body": chunk, "more_body": more}

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        self.close()


class BoundedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedRequest
        return protocol


class BoundedServer(Server):
    """Daphne's server with `BoundedHTTPFactory`: `Server.run` makes its factory as
    `self.http_factory = HTTPFactory(self)`, so the bounded one is put in on assignment.
    Before it listens, the application's `warm_up` (previously.housekeeping: the embedding
    model, templates, the URLconf, what a streamed reply imports) loads what the first turns
    would otherwise wait for (issue 24 point 11), and what is
    loaded by then is frozen out of the garbage collector's passes."""

    def run(self):
        warm_up = getattr(self.application, "warm_up", None)
        if warm_up is not None:
            warm_up()
        # All of it (Django, the openai SDK's types, the app, the embedding model, the templates)
        # lives as long as the process: kept out of the collector's full passes, which otherwise
        # stopped every socket of the process for ~90 ms every half minute under load (BENCH §4).
        gc.freeze()
        super().run()

    @property
    def http_factory(self):
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory):
        self._http_factory = factory if isinstance(factory, BoundedHTTPFactory) else BoundedHTTPFactory(self)

    def create_application(self, protocol, scope):
        """Daphne's, except that a signed-in upload's body is read from its file as the
        application asks (`_BodyFromFile`), not put in its queue whole."""
        fd = protocol.body_file() if getattr(protocol, "uploader", None) else None
        if fd is None:
            return super().create_application(protocol, scope)
        assert "application_instance" not in self.connections[protocol]
        input_queue = _BodyFromFile(fd)
        protocol.content.seek(0, os.SEEK_END)  # Daphne's own loop then reads nothing more
        scope.setdefault("asgi", {"version": "3.0"})
        application_instance = self.application(scope=scope, receive=input_queue.get,
                                                send=partial(self.handle_reply, protocol))
        if protocol not in self.connections:
            input_queue.close()
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            application_instance, loop=asyncio.get_event_loop())
        return input_queue


class BoundedCommandLineInterface(CommandLineInterface):
    server_class = BoundedServer


def main(argv: list[str] | None = None) -> None:
    # A thread that computes (a long reply's Markdown, an import's parse) keeps the GIL for the
    # whole switch interval each time a request's thread gives it up to wait on a socket or
    # the database; at Python's 5 ms that convoy took another person's login page from 8 ms
    # to 150-300 ms during a resync of six slow replies, at 1 ms to 68-77 ms (issue 24 point 4).
    sys.setswitchinterval(SWITCH_INTERVAL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    lock = server_lock.hold()  # O6: `manage.py restore` refuses while any server process runs
    try:
        BoundedCommandLineInterface().run(sys.argv[1:] if argv is None else argv)
    finally:
        lock.close()


if __name__ == "__main__":
    main()
