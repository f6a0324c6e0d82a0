"""Login attempts are throttled per account and address (SPEC S3, django-axes), and the
lock-out is explained on the page, in Chinese and English."""

import pytest
from django.contrib.auth import base_user
from django.test import Client

from previously.pages.login_guard import client_address
from tests.csp import assert_csp_clean
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def attempt(client, username, password, *, ip="10.0.0.1", lang="en"):
    return client.post(
        "/login/", {"username": username, "password": password}, REMOTE_ADDR=ip, HTTP_ACCEPT_LANGUAGE=lang
    )


@pytest.fixture
def ana():
    user = UserFactory(username="ana")
    user.set_password("right-pw-123")
    user.save()
    return user


def test_five_failures_lock_the_account_from_that_address_only(ana, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, "ana", "wrong").status_code == 200  # the form again, with its error
    locked = attempt(client, "ana", "wrong")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Login locked for now" in page and "5 times in a row" in page and "15 minutes" in page
    assert_csp_clean(locked)
    # Even the right password is refused from that address while the lock lasts.
    assert attempt(client, "ana", "right-pw-123").status_code == 429
    # The same account from another address, and another account from this one, still log in.
    assert attempt(Client(), "ana", "right-pw-123", ip="10.0.0.2").status_code == 302
    bo = UserFactory(username="bo")
    bo.set_password("bo-pw-12345")
    bo.save()
    assert attempt(Client(), "bo", "bo-pw-12345", ip="10.0.0.1").status_code == 302


def test_the_lock_out_page_speaks_chinese(ana, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = attempt(client, "ana", "错", lang="zh-hans")
    page = response.content.decode()
    assert response.status_code == 429
    assert "暂时无法登录" in page and "连续 5 次输错密码" in page and "15 分钟" in page


def test_a_success_resets_the_count(ana, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt(client, "ana", "wrong")
    assert attempt(client, "ana", "right-pw-123").status_code == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(Client(), "ana", "wrong").status_code == 200


# Issue 24 point 8: behind a proxy, and loops of guesses at names that do not exist.

PROXY = "10.9.0.1"


def via_proxy(client, username, password, *, client_ip, lang="en"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=PROXY,
                       HTTP_X_FORWARDED_FOR=client_ip, HTTP_ACCEPT_LANGUAGE=lang)


def test_behind_a_trusted_proxy_a_stranger_cannot_lock_the_person_out(ana, settings):
    settings.TRUSTED_PROXIES = ["10.9.0.0/16"]
    stranger = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = via_proxy(stranger, "ana", "wrong", client_ip="203.0.113.5")
    assert response.status_code == 429  # the stranger's own address is locked for that account
    assert via_proxy(Client(), "ana", "right-pw-123", client_ip="198.51.100.7").status_code == 302


def test_the_forwarded_address_is_read_only_from_a_trusted_proxy(rf, settings):
    settings.TRUSTED_PROXIES = ["10.9.0.0/16", "fd00::/8"]
    forged = rf.get("/", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert client_address(forged) == "203.0.113.9"  # a direct client cannot choose its address
    chain = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7, 10.9.0.2")
    assert client_address(chain) == "198.51.100.7"  # the client's own left-most claim is not trusted
    assert client_address(rf.get("/", REMOTE_ADDR="fd00::1", HTTP_X_FORWARDED_FOR="2001:db8::5")) == "2001:db8::5"
    assert client_address(rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="nonsense")) == PROXY
    settings.TRUSTED_PROXIES = []
    assert client_address(chain) == PROXY


def test_guesses_at_unknown_names_are_refused_before_hashing(ana, settings, monkeypatch):
    """Failures from one address, whatever the username, are counted; past the limit the next
    login from there is refused at once (429, the setting named), without a password hash, and
    other addresses are not affected."""
    settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES = 3
    hashed = []
    make_password = base_user.make_password
    monkeypatch.setattr(base_user, "make_password", lambda *a, **k: hashed.append(1) or make_password(*a, **k))
    loop = Client()
    for n in range(3):
        assert attempt(loop, f"nobody{n}", "guess", ip="10.0.0.66").status_code == 200
    assert len(hashed) == 3  # Django hashes once per unknown name (so timing does not tell names)
    refused = attempt(loop, "nobody9", "guess", ip="10.0.0.66")
    assert refused.status_code == 429 and len(hashed) == 3
    page = refused.content.decode()
    assert "Too many failed logins" in page and "PREVIOUSLY_LOGIN_ADDRESS_FAILURES" in page
    assert_csp_clean(refused)
    assert attempt(Client(), "ana", "right-pw-123", ip="10.0.0.67").status_code == 302
    zh = attempt(loop, "nobody9", "guess", ip="10.0.0.66", lang="zh-hans").content.decode()
    assert "登录失败次数过多" in zh


# --- The other forms that check a password or send a reset mail (issue 28 point 4, S3, O5) ---


def _signed_in_ana() -> Client:
    client = Client(REMOTE_ADDR="10.0.0.5")
    assert attempt(client, "ana", "right-pw-123", ip="10.0.0.5").status_code == 302
    return client


def test_the_password_change_form_locks_out_after_the_axes_failure_limit_issue28(ana, settings):
    client = _signed_in_ana()
    change = {"new_password1": "n3w-long-pw-881", "new_password2": "n3w-long-pw-881"}
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        page = client.post("/account/password/", {"old_password": "guess", **change}, REMOTE_ADDR="10.0.0.5")
        assert page.status_code == 200 and "incorrectly" in page.content.decode()
    assert client.post("/account/password/", {"old_password": "guess", **change},
                       REMOTE_ADDR="10.0.0.5").status_code == 429
    # Locked: the right old password is refused too, and the password stays.
    locked = client.post("/account/password/", {"old_password": "right-pw-123", **change}, REMOTE_ADDR="10.0.0.5")
    assert locked.status_code == 429 and "Login locked for now" in locked.content.decode()
    ana.refresh_from_db()
    assert ana.check_password("right-pw-123")


def test_the_delete_my_account_form_locks_out_after_the_axes_failure_limit_issue28(ana, settings):
    client = _signed_in_ana()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        page = client.post("/account/delete/", {"password": "guess", "confirm": "1"}, REMOTE_ADDR="10.0.0.5")
        assert page.status_code == 200 and "That is not your password." in page.content.decode()
    assert client.post("/account/delete/", {"password": "guess", "confirm": "1"},
                       REMOTE_ADDR="10.0.0.5").status_code == 429
    locked = client.post("/account/delete/", {"password": "right-pw-123", "confirm": "1"}, REMOTE_ADDR="10.0.0.5")
    assert locked.status_code == 429
    assert type(ana).objects.filter(pk=ana.pk).exists()  # nothing was deleted


def test_password_reset_requests_are_limited_per_client_address_issue28(ana, settings, mailoutbox):
    """Each request may send a mail: past PREVIOUSLY_LOGIN_ADDRESS_FAILURES from one address in
    the window, the next is answered 429 with no mail sent; other addresses are not affected."""
    settings.PREVIOUSLY_LOGIN_ADDRESS_FAILURES = 3
    ana.email = "ana@example.org"
    ana.save()
    loop = Client()
    for _ in range(3):
        assert loop.post("/password-reset/", {"email": "ana@example.org"}, REMOTE_ADDR="10.0.0.77").status_code == 302
    assert len(mailoutbox) == 3
    refused = loop.post("/password-reset/", {"email": "ana@example.org"}, REMOTE_ADDR="10.0.0.77")
    assert refused.status_code == 429 and len(mailoutbox) == 3
    page = refused.content.decode()
    assert "Too many password reset requests" in page and "PREVIOUSLY_LOGIN_ADDRESS_FAILURES" in page
    assert_csp_clean(refused)
    zh = loop.post("/password-reset/", {"email": "ana@example.org"}, REMOTE_ADDR="10.0.0.77",
                   HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "重置密码的请求过多" in zh
    assert Client().post("/password-reset/", {"email": "ana@example.org"}, REMOTE_ADDR="10.0.0.78").status_code == 302
    assert len(mailoutbox) == 4
    assert attempt(Client(), "ana", "right-pw-123", ip="10.0.0.77").status_code == 302  # logins are counted apart
