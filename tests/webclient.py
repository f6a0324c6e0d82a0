"""A real browser's HTTP side for the cross-process test and the load test: log in through
the login form (CSRF cookie + token), then POST with the token and open the chat websocket
with the session cookie and a same-origin Origin header."""

import http.cookiejar
import re
import ssl
import urllib.parse
import urllib.request

# One TLS context for every client: urllib's opener otherwise reads the CA store for each (about
# 25 ms of CPU; the hostile suite's login loops made hundreds), though these talk plain HTTP.
TLS = ssl.create_default_context()


class WebClient:
    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                  urllib.request.HTTPSHandler(context=TLS))

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def get(self, path: str, base: str | None = None) -> str:
        with self.opener.open((base or self.base) + path, timeout=30) as r:
            return r.read().decode()

    def post(self, path: str, data: dict | None = None, base: str | None = None, headers: dict | None = None) -> int:
        body = urllib.parse.urlencode(data or {}).encode()
        req = urllib.request.Request((base or self.base) + path, data=body, method="POST",
                                     headers={"X-CSRFToken": self.cookie("csrftoken"), **(headers or {})})
        with self.opener.open(req, timeout=30) as r:
            return r.status

    def login(self, username: str, password: str) -> None:
        page = self.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        self.post("/login/", {"username": username, "password": password, "csrfmiddlewaretoken": token})
        assert self.cookie("sessionid"), "login failed"

    def ws_args(self, profile_key: str = "owner", base: str | None = None) -> tuple[str, dict]:
        http_base = base or self.base
        url = http_base.replace("http://", "ws://") + f"/ws/chat/{profile_key}/"
        headers = {"Cookie": f"sessionid={self.cookie('sessionid')}", "Origin": http_base}
        return url, headers
