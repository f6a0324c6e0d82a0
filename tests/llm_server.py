"""A local OpenAI-compatible HTTP server for tests: real HTTP, real SDK, scripted answers.

Queue what the "model" should do with `server.script(...)`; every request body is kept
in `server.requests`. Streams are Server-Sent Events like the real API. Set `server.api_key`
and every request without `Authorization: Bearer <that key>` is answered 401, as a hosted API
answers a wrong key.
"""

import json
import socket
import struct
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Turn:
    """One scripted answer. For streams: `chunks`; `die_after` drops the connection after
    that many chunks; `status` answers an HTTP error instead. For tool calling: `tool_calls`
    as [(name, arguments-dict-or-json-text)]."""

    chunks: list[str] = field(default_factory=list)
    content: str | None = None
    tool_calls: list[tuple[str, object]] = field(default_factory=list)
    delay: float = 0.0
    chunk_delay: float = 0.0  # seconds before each streamed chunk (a slow model, for stop tests)
    pauses: dict[int, float] = field(default_factory=dict)  # seconds before the chunk of that index (instead of chunk_delay)
    die_after: int | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)  # sent with an error status (Retry-After)
    message: str = ""  # an error status's message (default "scripted <status>")
    no_done: bool = False  # the stream just ends: no finish_reason, no [DONE]
    reset: bool = False  # the connection is reset before any answer
    error_after: int | None = None  # an SSE error event (500) after that many chunks, as llama.cpp sends


class FakeLLMServer:
    def __init__(self, default: Turn | None = None, models: list[str] | None = ("fake-model",)):
        self.turns: deque[Turn] = deque()
        # What GET /models lists; None answers 404, as endpoints that list no models do.
        self.models = None if models is None else list(models)
        self.requests: list[dict] = []
        self.api_key: str | None = None  # None: any key or none is taken
        self.closed_streams = 0  # streams the client hung up on before the end
        self.default = default or Turn(chunks=["Hello", " there", "!"])
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *turns: Turn) -> None:
        self.turns.extend(turns)

    def start(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self) -> Turn:
        return self.turns.popleft() if self.turns else self.default

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _refused(self) -> bool:
                """401 unless the key is the one required, as OpenAI answers a wrong key."""
                if server.api_key is None or self.headers.get("Authorization") == f"Bearer {server.api_key}":
                    return False
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._json(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return True

            def do_GET(self):
                if self._refused():
                    return
                if self.path.rstrip("/").endswith("/models") and server.models is not None:
                    self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                if self._refused():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                if self.path.rstrip("/").endswith("/embeddings"):
                    self._embeddings(body)
                    return
                turn = server._next()
                if turn.delay:
                    time.sleep(turn.delay)
                if turn.reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()  # RST, as a crashed server's kernel sends
                    self.close_connection = True
                    return
                if turn.status != 200:
                    self._json(turn.status, {"error": {"message": turn.message or f"scripted {turn.status}"}},
                               headers=turn.headers)
                elif body.get("stream"):
                    self._stream(body, turn)
                else:
                    self._complete(body, turn)

            def _embeddings(self, body):
                """/embeddings: a fixed 8-d vector per text, from its words' characters (texts
                sharing words point the same way), as an embedding server would answer."""
                texts = body.get("input") or []
                texts = [texts] if isinstance(texts, str) else texts
                data = []
                for i, text in enumerate(texts):
                    vec = [0.0] * 8
                    for word in str(text).lower().split():
                        vec[sum(map(ord, word)) % 8] += 1.0
                    data.append({"object": "embedding", "index": i, "embedding": vec})
                self._json(200, {"object": "list", "data": data, "model": body.get("model", ""),
                                 "usage": {"prompt_tokens": 0, "total_tokens": 0}})

            def _json(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _complete(self, body, turn):
                calls = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:8]}",
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                        },
                    }
                    for name, args in turn.tool_calls
                ]
                message = {"role": "assistant", "content": turn.content if turn.content is not None else "".join(turn.chunks)}
                if calls:
                    message["tool_calls"] = calls
                self._json(200, {
                    "id": "cmpl-fake", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake-model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                })

            def _stream(self, body, turn):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "chunk-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": body.get("model", "fake-model")}
                chunks = turn.chunks or ([turn.content] if turn.content else [])
                for i, text in enumerate(chunks):
                    if turn.error_after is not None and i >= turn.error_after:
                        error = {"error": {"message": "scripted failure mid-stream", "type": "server_error", "code": 500}}
                        self.wfile.write(f"data: {json.dumps(error)}\n\n".encode())
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    if turn.die_after is not None and i >= turn.die_after:
                        self.wfile.flush()
                        self.connection.shutdown(2)  # the model server dies mid-stream
                        self.close_connection = True
                        return
                    if pause := turn.pauses.get(i, turn.chunk_delay):
                        time.sleep(pause)
                    event = dict(base, choices=[{"index": 0, "delta": {"content": text}, "finish_reason": None}])
                    try:
                        self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                        self.wfile.flush()
                    except OSError:  # the client closed the stream (a stopped reply)
                        server.closed_streams += 1
                        return
                if turn.no_done:
                    self.close_connection = True
                    return
                end = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler
