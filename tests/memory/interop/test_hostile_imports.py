"""Hostile input to the full importer (issue 9): random and truncated exports either import
whole or are refused — never a partial write."""

import json

import pytest
from django.apps import apps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.interop.export import export_json
from memory.interop.full_import import BadExport, import_full
from tests.factories import MessageFactory, ProfileFactory, UserFactory

pytestmark = pytest.mark.django_db


def counts() -> dict:
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("memory").get_models()}


def _try(data, user) -> None:
    before = counts()
    try:
        import_full(data=data, user=user)
    except (BadExport, ValueError, TypeError, KeyError, AttributeError):
        assert counts() == before, "a refused import wrote rows"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=2000), junk=st.binary(max_size=40))
def test_a_truncated_export_is_refused_or_imported_whole_never_partly(cut, junk):
    source = ProfileFactory(key="owner")
    for n in range(3):
        MessageFactory(profile=source, mid=f"c_{n:016x}", content=f"line {n}")
    text = json.dumps(export_json(profiles=[source]))
    target = UserFactory()
    broken = text[: cut % len(text)] + junk.decode("latin-1")
    try:
        data = json.loads(broken)
    except ValueError:
        return  # the view answers "not a JSON export"; nothing is read
    _try(data, target)


@settings(max_examples=80, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                    max_leaves=20))
def test_random_structures_with_the_right_header_never_write_partly(body):
    user = UserFactory()
    data = {"format": "previously-export", "version": 1, "profiles": [body] if not isinstance(body, list) else body}
    _try(data, user)
