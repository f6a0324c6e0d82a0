"""Issue 16 point 7: the first round's attacks and this round's, as an outsider and as a
second user, against a real `previously.server` on loopback — CSRF, CSP, cross-user isolation,
foreign origins (another port on the same host), a socket after logout, malformed frames,
off-site `next`, a GIF/JS polyglot upload. Each request's latency is printed."""

import asyncio
import io
import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
import websockets
from PIL import Image

from tests.hostile.server import start
from tests.webclient import WebClient

SETUP = """
from django.contrib.auth import get_user_model
from memory.images import store_image_message
from memory.models import Profile
import io
from PIL import Image
User = get_user_model()
for name in ("ana", "ben"):
    user = User.objects.create_user(name, password="pw-" + name + "-12345")
    profile = Profile.objects.create(user=user, key="owner", language="en")
out = io.BytesIO(); Image.new("RGB", (4, 4), (9, 9, 9)).save(out, "PNG")
ana = Profile.objects.get(user__username="ana")
print(store_image_message(profile=ana, mid="c_00000000000000a1", data=out.getvalue()).message.pk)
"""
TIMINGS: list[tuple[str, float]] = []


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    stack = start(tmp_path_factory.mktemp("hostile-site"))
    image_pk = int(stack.manage("shell", "-c", SETUP).split()[-1])
    base = f"http://127.0.0.1:{stack.ports[0]}"
    yield base, image_pk
    stack.stop()
    print("\n[hostile] latencies: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in TIMINGS))


def timed(name, fn, *args, **kwargs):
    started = time.monotonic()
    try:
        return fn(*args, **kwargs)
    finally:
        TIMINGS.append((name, (time.monotonic() - started) * 1000))


def status_of(opener, request) -> tuple[int, dict, bytes]:
    try:
        with opener.open(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def client(base, name) -> WebClient:
    c = WebClient(base)
    c.login(name, f"pw-{name}-12345")
    c.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(c.jar), NoRedirect)
    return c


def test_pages_carry_the_csp_and_a_post_without_csrf_is_refused(site):
    base, _ = site
    ana = client(base, "ana")
    status, headers, _ = timed("GET /", status_of, ana.opener, urllib.request.Request(base + "/"))
    assert status == 200 and "script-src 'self'" in headers.get("Content-Security-Policy", "")
    request = urllib.request.Request(base + "/chat/new/", data=b"", method="POST")  # no token
    assert timed("POST without CSRF", status_of, ana.opener, request)[0] == 403


def test_a_second_user_gets_the_same_404_for_another_users_image(site):
    base, image_pk = site
    ana, ben = client(base, "ana"), client(base, "ben")
    status, headers, body = timed("own image", status_of, ana.opener, urllib.request.Request(f"{base}/images/{image_pk}/"))
    assert status == 200 and headers["Content-Type"] == "image/png" and headers["X-Content-Type-Options"] == "nosniff"
    assert timed("other's image", status_of, ben.opener, urllib.request.Request(f"{base}/images/{image_pk}/"))[0] == 404


def test_next_never_leaves_the_site(site):
    base, _ = site
    ana = client(base, "ana")
    request = urllib.request.Request(base + "/chat/new/", data=b"next=https%3A%2F%2Fevil.example%2F", method="POST",
                                     headers={"X-CSRFToken": ana.cookie("csrftoken"), "Referer": base + "/"})
    status, headers, _ = timed("POST /chat/new/ next=evil", status_of, ana.opener, request)
    assert status == 302 and headers["Location"] == "/"


def _multipart(fields: dict, files: dict) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for name, value in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, data, ctype) in files.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                  f"Content-Type: {ctype}\r\n\r\n".encode() + data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def test_a_gif_js_polyglot_upload_is_served_as_a_plain_gif(site):
    base, _ = site
    ben = client(base, "ben")
    gif = io.BytesIO()
    Image.new("P", (6, 6), 1).save(gif, "GIF")
    body, ctype = _multipart({"mid": "c_00000000000000b1", "csrfmiddlewaretoken": ben.cookie("csrftoken")},
                             {"image": ("x.gif", gif.getvalue() + b"\n*/=1;alert(document.domain)//", "text/javascript")})
    request = urllib.request.Request(base + "/chat/image/", data=body, method="POST",
                                     headers={"Content-Type": ctype, "HX-Request": "true", "Referer": base + "/"})
    status, headers, _ = timed("polyglot upload", status_of, ben.opener, request)
    assert status == 201
    thumbs = [p for p in ben.get("/").split('"') if p.startswith("/images/") and p.endswith("/thumb/")]
    assert len(thumbs) == 1
    status, headers, data = status_of(ben.opener, urllib.request.Request(base + thumbs[0].removesuffix("thumb/")))
    assert status == 200 and headers["Content-Type"] == "image/gif" and b"alert" not in data


async def _socket_checks(base):
    ana = await asyncio.to_thread(client, base, "ana")
    url, headers = ana.ws_args()
    started = time.monotonic()
    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(url, additional_headers={**headers, "Origin": "http://127.0.0.1:9999"},
                                      open_timeout=20):
            pass
    TIMINGS.append(("ws other port refused", (time.monotonic() - started) * 1000))
    async with websockets.connect(url, additional_headers=headers, open_timeout=20) as ws:
        await ws.send(json.dumps({"action": {"a": 1}}))
        notice = await asyncio.wait_for(ws.recv(), 10)
        assert "must be text" in notice
        logout = urllib.request.Request(base + "/logout/", data=b"", method="POST",
                                        headers={"X-CSRFToken": ana.cookie("csrftoken"), "Referer": base + "/"})
        assert (await asyncio.to_thread(status_of, ana.opener, logout))[0] == 302
        await ws.send(json.dumps({"action": "send", "mid": "c_00000000000000c1", "text": "after logout"}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd.code == 4401


def test_sockets_from_another_port_are_refused_and_a_socket_dies_with_its_session(site):
    base, _ = site
    asyncio.run(_socket_checks(base))
