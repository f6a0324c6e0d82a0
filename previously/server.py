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

Run as `python -m previously.server [daphne options] previously.asgi:application`.
"""

import os
import sys

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from django.conf import settings
from django.urls import Resolver404, resolve

# Room above a route's file limit for the multipart boundaries, part headers and CSRF token.
ENVELOPE_BYTES = 64 * 1024

# URL names whose views take an upload, and the setting that bounds the file.
UPLOAD_ROUTES = {
    "data_import_preview": "PREVIOUSLY_MAX_IMPORT_BYTES",
    "chat_image_upload": "PREVIOUSLY_IMAGE_MAX_BYTES",
}

REFUSAL = (
    b"HTTP/1.1 413 Content Too Large\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\n"
    b"Connection: close\r\n\r\n%s"
)


def body_limit(path: bytes) -> int:
    """The largest request body, in bytes, the route at `path` (the raw request target) takes."""
    form = max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, settings.FILE_UPLOAD_MAX_MEMORY_SIZE or 0)
    try:
        name = resolve(path.split(b"?", 1)[0].decode("latin-1")).url_name
    except Resolver404:
        return form + ENVELOPE_BYTES
    setting = UPLOAD_ROUTES.get(name)
    return (getattr(settings, setting) if setting else form) + ENVELOPE_BYTES


class BoundedRequest(WebRequest):
    """Daphne's request, with the body bounded as it arrives and never parsed by Twisted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False
        self._body_limit = 0
        self._body_received = 0
        self._refused = False

    def gotLength(self, length):
        # Called once the headers are in; the request line's target is still only on the channel.
        self._body_limit = body_limit(getattr(self.channel, "_path", b"/"))
        if length is not None and length > self._body_limit:
            self._refuse(f"declared {length:,} bytes")
            length = 0  # an empty in-memory buffer: nothing of the body is kept
        super().gotLength(length)

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
        super().requestReceived(command, path, version)

    def _refuse(self, what: str) -> None:
        self._refused = True
        body = (
            f"Request body too large for this address ({what}; the limit is {self._body_limit:,} bytes).\n"
        ).encode()
        transport = self.channel.transport
        if transport is not None:
            transport.write(REFUSAL % (len(body), body))
        self.channel.loseConnection()


class BoundedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedRequest
        return protocol


class BoundedServer(Server):
    """Daphne's server with `BoundedHTTPFactory`: `Server.run` makes its factory as
    `self.http_factory = HTTPFactory(self)`, so the bounded one is put in on assignment.
    Before it listens, the application's `warm_up` (previously.asgi: the embedding model)
    loads what the first turns would otherwise wait for (issue 24 point 11)."""

    def run(self):
        warm_up = getattr(self.application, "warm_up", None)
        if warm_up is not None:
            warm_up()
        super().run()

    @property
    def http_factory(self):
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory):
        self._http_factory = factory if isinstance(factory, BoundedHTTPFactory) else BoundedHTTPFactory(self)


class BoundedCommandLineInterface(CommandLineInterface):
    server_class = BoundedServer


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    BoundedCommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
