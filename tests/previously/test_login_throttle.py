"""Login attempts are throttled per account and address (SPEC S3, django-axes), and the
lock-out is explained on the page, in Chinese and English."""

import pytest
from django.test import Client

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
