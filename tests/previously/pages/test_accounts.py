"""SPEC O5: invitations and optional sign-up, password change and reset, the list of one's
sessions with the others endable (their sockets closed), delete-my-account with D6's guarantees."""

import re
import secrets
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from axes.models import AccessAttempt
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.test import Client
from django.utils import timezone

from memory.archive import archive_message
from memory.models import AccountSession, Invitation, Profile
from previously.asgi import application
from tests import factories as f
from tests.csp import assert_csp_clean
from tests.memory.test_forget_audit import dump_all_tables
from tests.sqlite_file import database_bytes

User = get_user_model()
PASSWORD = "pw-lina-4821"


def _person(username="lina", *, staff=False, email=""):
    user = User.objects.create_user(username=username, password=PASSWORD, is_staff=staff, email=email)
    f.ProfileFactory(user=user, key="owner", language="en")
    return user


def _signed_in(username, password=PASSWORD, ua="Firefox on a laptop"):
    c = Client(HTTP_USER_AGENT=ua)
    assert c.post("/login/", {"username": username, "password": password}).status_code == 302
    c.get("/account/")  # seen: the session is listed
    return c


def _link(page: str) -> str:
    return re.search(r'class="link-once">([^<]+)<', page).group(1)


@pytest.mark.django_db
def test_an_invitation_link_makes_one_account_once_and_expires(client):
    staff = _person("root", staff=True)
    client.force_login(staff)
    client.post("/people/invite/", {"days": 2, "note": "for Mei 梅"})
    page = client.get("/people/").content.decode()
    assert_csp_clean(client.get("/people/"))
    link = _link(page)
    assert "for Mei 梅" in page and _link.__name__  # the note is listed; the link shown once
    assert "link-once" not in client.get("/people/").content.decode()
    path = link.split("testserver", 1)[1]

    guest = Client()
    assert guest.get(path).status_code == 200
    made = guest.post(path, {"username": "mei", "password1": "a-long-pw-9931", "password2": "a-long-pw-9931"})
    assert made.status_code == 302 and User.objects.filter(username="mei").exists()
    again = Client().post(path, {"username": "mei2", "password1": "a-long-pw-9931", "password2": "a-long-pw-9931"})
    assert again.status_code == 410 and not User.objects.filter(username="mei2").exists()

    client.post("/people/invite/", {"days": 1})
    stale = _link(client.get("/people/").content.decode()).split("testserver", 1)[1]
    Invitation.objects.filter(used_at__isnull=True).update(expires_at=timezone.now() - timedelta(minutes=1))
    expired = Client().get(stale)
    assert expired.status_code == 410 and "expired" in expired.content.decode()


@pytest.mark.django_db
def test_open_sign_up_is_off_by_default_and_staff_can_turn_it_on(client):
    assert Client().get("/signup/").status_code == 403
    client.force_login(_person("root", staff=True))
    client.post("/people/signup/", {"on": "1"})
    guest = Client()
    assert "/signup/" in guest.get("/login/").content.decode()
    guest.post("/signup/", {"username": "noa", "password1": "a-long-pw-9931", "password2": "a-long-pw-9931"})
    assert User.objects.filter(username="noa").exists()
    assert Client().post("/people/signup/", {"on": "0"}).status_code == 302  # signed out: to the login
    assert Client().get("/signup/").status_code == 200


@pytest.mark.django_db
def test_only_staff_reach_the_people_page(client):
    client.force_login(_person())
    assert client.get("/people/").status_code == 403
    assert client.post("/people/invite/", {"days": 3}).status_code == 403
    assert not Invitation.objects.exists()


@pytest.mark.django_db
def test_changing_the_password_checks_the_old_one_through_axes_and_signs_out_the_other_sessions():
    _person()
    here, there = _signed_in("lina"), _signed_in("lina", ua="Safari on a phone")
    wrong = here.post("/account/password/", {"old_password": "nope", "new_password1": "x-new-pw-7734",
                                             "new_password2": "x-new-pw-7734"})
    assert wrong.status_code == 200 and AccessAttempt.objects.filter(username="lina").exists()
    done = here.post("/account/password/", {"old_password": PASSWORD, "new_password1": "x-new-pw-7734",
                                            "new_password2": "x-new-pw-7734"})
    assert done.status_code == 302
    assert here.get("/account/").status_code == 200  # this session stays
    assert there.get("/account/").status_code == 302  # the other one is signed out
    assert AccountSession.objects.filter(user__username="lina").count() == 1


@pytest.mark.django_db
def test_a_reset_link_by_email_works_once():
    _person(email="lina@example.org")
    Client().post("/password-reset/", {"email": "lina@example.org"})
    assert len(mail.outbox) == 1
    path = re.search(r"https?://[^/]+(/password-reset/\S+/)", mail.outbox[0].body).group(1)
    guest = Client()
    form = guest.get(path, follow=True)
    assert b"new_password1" in form.content
    guest.post(form.redirect_chain[-1][0], {"new_password1": "y-new-pw-5521", "new_password2": "y-new-pw-5521"})
    assert User.objects.get(username="lina").check_password("y-new-pw-5521")
    used = Client().get(path, follow=True)
    assert b"new_password1" not in used.content and "used or has expired" in used.content.decode()


@pytest.mark.django_db
def test_staff_make_a_one_time_reset_link(client):
    person = _person()
    client.force_login(_person("root", staff=True))
    client.post(f"/people/{person.pk}/reset-link/")
    path = _link(client.get("/people/").content.decode()).split("testserver", 1)[1]
    guest = Client()
    form = guest.get(path, follow=True)
    guest.post(form.redirect_chain[-1][0], {"new_password1": "z-new-pw-2209", "new_password2": "z-new-pw-2209"})
    assert User.objects.get(pk=person.pk).check_password("z-new-pw-2209")
    assert b"new_password1" not in Client().get(path, follow=True).content


@pytest.mark.django_db
def test_the_account_page_lists_sessions_with_device_and_address():
    _person()
    _signed_in("lina", ua="Safari on a phone")
    page = _signed_in("lina").get("/account/")
    text = page.content.decode()
    assert "Safari on a phone" in text and "Firefox on a laptop" in text and "127.0.0.1" in text
    assert_csp_clean(page)


@pytest.mark.django_db(transaction=True)
async def test_ending_another_session_closes_its_chat_socket():
    await sync_to_async(_person)()
    phone = await sync_to_async(_signed_in)("lina", PASSWORD, "Safari on a phone")
    laptop = await sync_to_async(_signed_in)("lina")
    sid = phone.cookies["sessionid"].value
    headers = [(b"cookie", f"sessionid={sid}".encode()), (b"host", b"127.0.0.1:8000"),
               (b"origin", b"http://127.0.0.1:8000")]
    socket = WebsocketCommunicator(application, "/ws/chat/owner/", headers=headers)
    connected, _ = await socket.connect()
    assert connected
    await sync_to_async(laptop.post)("/account/sessions/end/", {"session": sid})
    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    assert (await sync_to_async(phone.get)("/account/")).status_code == 302
    await socket.disconnect()


def _reset_by_link(email: str, new_password: str) -> None:
    Client().post("/password-reset/", {"email": email})
    path = re.search(r"https?://[^/]+(/password-reset/\S+/)", mail.outbox[-1].body).group(1)
    guest = Client()
    form = guest.get(path, follow=True)
    assert guest.post(form.redirect_chain[-1][0], {"new_password1": new_password,
                                                   "new_password2": new_password}).status_code == 302


@pytest.mark.django_db(transaction=True)
async def test_a_reset_by_link_signs_out_every_session_and_closes_their_chat_sockets_issue28_o5():
    await sync_to_async(_person)(email="lina@example.org")
    phone = await sync_to_async(_signed_in)("lina", PASSWORD, "Safari on a phone")
    laptop = await sync_to_async(_signed_in)("lina")
    headers = [(b"cookie", f"sessionid={phone.cookies['sessionid'].value}".encode()), (b"host", b"127.0.0.1:8000"),
               (b"origin", b"http://127.0.0.1:8000")]
    socket = WebsocketCommunicator(application, "/ws/chat/owner/", headers=headers)
    connected, _ = await socket.connect()
    assert connected
    await sync_to_async(_reset_by_link)("lina@example.org", "r-new-pw-6610")
    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    assert (await sync_to_async(phone.get)("/account/")).status_code == 302
    assert (await sync_to_async(laptop.get)("/account/")).status_code == 302
    assert not await AccountSession.objects.filter(user__username="lina").aexists()
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
def test_deleting_my_account_asks_the_password_and_leaves_no_copy():
    name = f"zora{secrets.token_hex(4)}"
    user = User.objects.create_user(username=name, password=PASSWORD)
    profile = Profile.objects.create(user=user, key="owner", name="小岛")
    secret = f"我的秘密是{secrets.token_hex(6)} 🌙 hidden words"
    archive_message(profile=profile, mid=f"c_{secrets.token_hex(8)}", speaker="user", content=secret)
    client = _signed_in(name)
    page = client.get("/account/delete/")
    assert "/data/" in page.content.decode()  # the export is offered first
    refused = client.post("/account/delete/", {"password": "wrong", "confirm": "1"})
    assert refused.status_code == 200 and User.objects.filter(username=name).exists()
    client.post("/account/delete/", {"password": PASSWORD, "confirm": "1"})
    assert not User.objects.filter(username=name).exists()
    dump = dump_all_tables()
    assert secret not in dump and name not in dump
    if connection.vendor == "sqlite":
        assert secret.encode() not in database_bytes(connection.settings_dict["NAME"])


@pytest.mark.django_db
def test_deleting_my_account_clears_the_note_and_name_on_the_invitation_i_used_issue28_d6(client):
    client.force_login(_person("root", staff=True))
    client.post("/people/invite/", {"days": 7, "note": "for Lin 林 from the choir"})
    link = _link(client.get("/people/").content.decode())
    lin = Client()
    lin.post(link.split("testserver", 1)[1], {"username": "lin", "password1": "a-long-pw-9931",
                                               "password2": "a-long-pw-9931"})
    assert Invitation.objects.get().used_by.username == "lin"
    assert lin.post("/account/delete/", {"password": "a-long-pw-9931", "confirm": "1"}).status_code == 302
    used = Invitation.objects.get()
    assert (used.note, used.used_by, used.used_at is not None) == ("", None, True)  # still used: the link stays spent
    assert "for Lin 林" not in client.get("/people/").content.decode()
