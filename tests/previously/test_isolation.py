"""SPEC P2: user B tries every page, API, websocket, export and admin view with user A's
profile keys, mids, hids, eids, rids and slice refs — and gets 403/404, sees none of A's
content, and changes none of A's rows.

The URL list comes from the resolver, not from this file: every named route is requested
with A's identifiers filled into its parameters. A new route whose parameter this file
cannot fill fails `test_every_route_parameter_can_be_filled` — add the parameter to FILL
(or, for a page anyone may see, the route name to PUBLIC).
"""

import json

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.resolvers import RegexPattern
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from memory.card import Card as ParsedCard
from memory.models import (
    Card,
    CardSnapshot,
    EvolutionRun,
    Experience,
    Favourite,
    Highlight,
    Message,
    Profile,
    Relation,
    Slice,
    SliceLogEntry,
)
from previously.agent import tools
from previously.routing import websocket_urlpatterns
from tests import factories as f

SECRET = "ALICE-SECRET-7f3a"
A_KEY = "alice-only"
# Pages anyone may see, logged in or not (their content is not per-user).
PUBLIC = {
    "login",  # the login form
    "password_reset", "password_reset_done", "password_reset_confirm", "password_reset_complete",  # O5: public
    "logout",  # POST only; ends the caller's own session
    "admin:login",  # Django's admin login form
    "admin:logout",
    "admin:jsi18n",  # the admin's JavaScript catalogue (static strings)
}
# Unnamed routes cannot be reversed. The admin's are its catch-all and the old
# <object_id>/ → <object_id>/change/ redirects: both land on named, checked admin views.
UNNAMED_ALLOWED_PREFIX = "admin/"


def walk(patterns=None, prefix="", namespace="", params=()):
    """(full name, route string, parameter names) of every URL pattern, includes flattened."""
    patterns = get_resolver().url_patterns if patterns is None else patterns
    for p in patterns:
        here = tuple(_params(p.pattern))
        if isinstance(p, URLResolver):
            ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from walk(p.url_patterns, prefix + str(p.pattern), ns, params + here)
        elif isinstance(p, URLPattern):
            name = f"{namespace}{p.name}" if p.name else None
            yield name, prefix + str(p.pattern), params + here


def _params(pattern):
    if isinstance(pattern, RegexPattern):
        return list(pattern.regex.groupindex)
    return list(getattr(pattern, "converters", {}))


@pytest.fixture
def world(db):
    """A's data with a secret in every text field; B with a profile of their own."""
    alice = f.UserFactory(username="alice")
    bob = f.UserFactory(username="bob")
    a = f.ProfileFactory(user=alice, key=A_KEY, persona=f"persona {SECRET}")
    f.ProfileFactory(user=bob, key="owner")
    s = f.SliceFactory(profile=a, key="2031-05-06-0708")
    m1 = f.MessageFactory(profile=a, slice=s, mid="c_a11ce00000000001", content=f"my diary {SECRET}")
    m2 = f.MessageFactory(
        profile=a, slice=s, mid="a_1900000000000_a11ce001", speaker=Message.Speaker.ASSISTANT,
        content=f"reply {SECRET}",
    )
    h = f.HighlightFactory(message=m1, hid="h_a11ce", content=f"my diary {SECRET}")
    f.FavouriteFactory(message=m1, excerpt=f"diary {SECRET}")
    e = f.ExperienceFactory(profile=a, eid="e_a11ce", title=f"trip {SECRET}", content=f"went {SECRET}")
    f.ExperienceSourceFactory(experience=e, message=m2)
    r = f.RelationFactory(profile=a, rid="r_a11ce", from_highlight=h, to_experience=e)
    f.CardFactory(profile=a, text=f"# Previously On\n\n## Identity\n- Name: {SECRET}\n")
    f.CardSnapshotFactory(slice=s, text=f"card at end {SECRET}")
    f.EvolutionRunFactory(profile=a, slice=s, summary=f"run {SECRET}")
    f.SliceLogEntryFactory(slice=s, summary=f"log {SECRET}")
    img = f.MessageFactory(
        profile=a, slice=s, mid="c_a11ce00000000002", message_type=Message.Type.IMAGE,
        content=f"photo {SECRET}", attachment={"name": f"{SECRET}.png", "content_type": "image/png"},
    )
    return {"alice": alice, "bob": bob, "a": a, "slice": s, "m1": m1, "m2": m2, "h": h, "e": e, "r": r,
            "image": img}


def a_state(a: Profile) -> dict:
    """Every row of A's, as values: compared before and after B's attempts."""
    models = [Slice, Message, Highlight, Favourite, Experience, Relation, Card, CardSnapshot, EvolutionRun]
    state = {m.__name__: sorted(map(repr, m.objects.filter(profile=a).values())) for m in models}
    state["Profile"] = [repr(Profile.objects.filter(pk=a.pk).values().first())]
    state["SliceLogEntry"] = sorted(map(repr, SliceLogEntry.objects.filter(slice__profile=a).values()))
    return state


def fill(world, name: str, params: tuple[str, ...], route: str) -> dict:
    """A's identifiers for each route parameter (admin object ids: A's row of that model)."""
    values = {
        "profile_key": A_KEY,
        "mid": world["m1"].mid,
        "hid": world["h"].hid,
        "eid": world["e"].eid,
        "rid": world["r"].rid,
        "key": world["slice"].key,
        "action": "confirm",
        "app_label": "memory",
        "id": str(world["alice"].pk),
        "content_type_id": str(ContentType.objects.get_for_model(Message).pk),
        "pk": world["image"].pk,  # /images/<pk>/: A's image message
        "user_id": world["alice"].pk,  # staff's one-time reset link for A (O5)
        "uidb64": urlsafe_base64_encode(force_bytes(world["alice"].pk)),  # a reset link of A's
        "token": "0" * 24,  # an invitation or reset token nobody was given
        "fmt": "md",  # /profiles/<key>/export/<fmt>/: a conversation as Markdown
    }
    out = {}
    for p in params:
        if p == "object_id":
            out[p] = str(_admin_object(world, name).pk)
        elif p in values:
            out[p] = values[p]
        else:
            raise KeyError(p)
    return out


def _admin_object(world, name: str):
    model = next(
        (m for m in apps.get_models() if name.startswith(f"admin:{m._meta.app_label}_{m._meta.model_name}_")),
        Message,  # admin:view_on_site
    )
    if model is Profile:
        return world["a"]
    if model._meta.label == "auth.User":
        return world["alice"]
    for field in ("profile", "slice__profile", "message__profile", "experience__profile"):
        try:
            row = model.objects.filter(**{field: world["a"]}).first()
        except Exception:  # noqa: BLE001 - this model has no such path to a profile
            continue
        if row is not None:
            return row
    return model.objects.first() or world["m1"]


def routes():
    return [(n, r, p) for n, r, p in walk() if n is not None]


def test_every_route_parameter_can_be_filled(world):
    unfillable = []
    for name, route, params in routes():
        try:
            fill(world, name, params, route)
        except KeyError as exc:
            unfillable.append(f"{name} ({route}): parameter {exc}")
    unnamed = [r for n, r, _ in walk() if n is None and not r.startswith(UNNAMED_ALLOWED_PREFIX)]
    assert not unfillable, "add these parameters to FILL in test_isolation.py:\n" + "\n".join(unfillable)
    assert not unnamed, f"unnamed routes cannot be checked for isolation: {unnamed}"


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode("utf-8", "replace")
    return response.content.decode("utf-8", "replace")


def test_user_b_gets_nothing_of_a_from_any_page_p2(world, client):
    client.force_login(world["bob"])
    before = a_state(world["a"])
    # Also A's identifiers in every query parameter a page reads.
    query = {"profile": A_KEY, "at": world["slice"].key, "user": "alice", "before": world["m1"].mid}
    form = {
        "key": A_KEY, "profile": A_KEY, "mid": world["m1"].mid, "text": "x", "user": "alice",
        "token": "0" * 32, "next": "/", "into": world["e"].eid, "title": "t", "content": "c",
    }
    checked = []
    for name, route, params in routes():
        url = reverse(name, kwargs=fill(world, name, params, route))
        carries_a = bool(params) and not name.startswith("admin:")
        for method in ("get", "post"):
            client.force_login(world["bob"])  # the logout route ends the session
            response = getattr(client, method)(url, query if method == "get" else form)
            body = _body(response)
            where = f"{method.upper()} {url} ({name}) → {response.status_code}"
            assert response.status_code < 500, where
            assert SECRET not in body, f"A's content leaked: {where}"
            # A form that failed validation shows B what B typed, which here is A's key.
            echoed = method == "post" and response.status_code == 400 and f'value="{A_KEY}"' in body
            assert A_KEY not in body or name in PUBLIC or echoed, f"A's profile key shown: {where}"
            if name.startswith("admin:") and name not in PUBLIC:
                # Non-staff: the admin sends B to its login page, whatever the object.
                assert response.status_code == 302 and "/admin/login/" in response.url, where
            elif carries_a:
                assert response.status_code in (403, 404, 405), where
            checked.append(where)
    assert a_state(world["a"]) == before, "B's requests changed A's rows"
    assert len(checked) >= 2 * len(routes())


def test_b_cannot_export_or_import_into_a_p2(world, client):
    client.force_login(world["bob"])
    assert client.get(reverse("data_export"), {"user": "alice"}).status_code == 403
    assert client.get(reverse("data_export"), {"profile": A_KEY}).status_code == 404
    own = _body(client.get(reverse("data_export")))
    assert SECRET not in own and A_KEY not in own
    assert client.get(reverse("data"), {"user": "alice"}).status_code == 403


def test_only_staff_reach_the_admin_p2(world, client):
    client.force_login(world["bob"])
    response = client.get(reverse("admin:memory_message_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response.url
    staff = f.UserFactory(username="staff", is_staff=True, is_superuser=True)
    client.force_login(staff)
    assert client.get(reverse("admin:memory_message_changelist")).status_code == 200


@pytest.mark.django_db(transaction=True)
async def test_every_websocket_route_refuses_b_with_a_key_p2(world):
    for pattern in websocket_urlpatterns:
        path = "/" + str(pattern.pattern).replace("<str:profile_key>", A_KEY)
        assert A_KEY in path, f"fill the parameters of websocket route {pattern.pattern}"
        for user, code in ((world["bob"], 4403), (None, 4401)):
            communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
            if user is not None:
                communicator.scope["user"] = user
            connected, close_code = await communicator.connect()
            assert (connected, close_code) == (False, code), path
            await communicator.disconnect()


def _ctx_for_b(world) -> tools.Context:
    from memory.card.store import refs_resolver

    bob_profile = Profile.objects.get(user=world["bob"], key="owner")
    return tools.Context(profile=bob_profile, card=ParsedCard(), refs_exist=refs_resolver(bob_profile))


def test_the_agents_tools_cannot_reach_another_profile_whatever_the_arguments_p2(world):
    ctx = _ctx_for_b(world)
    before = a_state(world["a"])
    ref, key = world["slice"].ref, world["slice"].key
    attempts = [
        ("read_slice", {"ref": ref}),
        ("read_slice", {"ref": key}),
        ("read_slice", {"ref": ["2031/05/06/0708"]}),
        ("read_slice", {"ref": f"{ref}' OR 1=1 --"}),
        ("read_card_at", {"ref": ref}),
        ("read_card_at", {"ref": {"profile": A_KEY, "ref": ref}}),
        ("propose_experience", {"title": "t", "content": "c", "source_mids": [world["m1"].mid]}),
        ("propose_experience", {"title": "t", "content": "c", "source_mids": [world["m2"].mid, "c_0000000000000000"]}),
        ("add_now", {"text": "x", "refs": [ref], "since": "2031-05-06"}),
        ("add_anchor_fact", {"text": "x", "refs": [ref]}),
        ("set_identity", {"field": "Name", "value": "x", "refs": [ref], "profile": A_KEY}),
    ]
    for tool, arguments in attempts:
        outcome = tools.dispatch(ctx, tool, json.dumps(arguments))
        assert not outcome.accepted, (tool, arguments, outcome.message)
        assert SECRET not in outcome.message
    assert ctx.accepted == []
    assert a_state(world["a"]) == before
    assert not Experience.objects.filter(profile=ctx.profile).exists()
