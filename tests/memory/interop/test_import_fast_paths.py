"""The importer's fast paths give exactly what the plain paths give (BENCH.md §3 work)."""

import json
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction
from django.db.models.signals import post_init

from memory.interop.bulk_insert import insert_rows, new_instance, reserve_pks
from memory.interop.legacy.read import loads_value
from memory.interop.legacy.rows import FragmentRow, MessageRow
from memory.interop.legacy_shapes import BadValue, read_value
from memory.models import LegacyFragment, Message, Profile, Slice


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"a": "\\ud83d\\udc31 猫"}',
        '{"a": 123456789012345678901234567890}',
        '{"a": [1, {"b": -9223372036854775809}]}',
        '{"a": 0.1, "b": 1e400}',
        '{"a": NaN}',
        '{"a": "\\ud800"}',
        '"just a string"',
        "12345678901234567890123",
        '{"ts": 1760865000000, "hour": 21, "x": null, "y": true}',
    ],
)
def test_loads_value_is_json_loads(text):
    expected = json.loads(text)
    got = loads_value(text)
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)


def test_loads_value_errors_are_the_json_modules():
    with pytest.raises(json.JSONDecodeError) as fast:
        loads_value("{bad")
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads("{bad")
    assert str(fast.value) == str(plain.value)


@pytest.mark.parametrize(
    "value",
    [
        {"mid": "c_1", "content": "hi", "created_at": "2026-10-19T12:34:56.789Z", "deleted_at": None},
        {"mid": "c_1", "content": "hi", "created_at": "2026-10-19T12:34:56Z", "deleted_at": ""},
        {"mid": "c_1", "content": None, "created_at": 1760865000000, "extra": [1]},
        {"mid": "c_1", "content": "", "created_at": " 2026-10-19T12:34:56.789Z"},
    ],
)
def test_read_value_short_paths_match_the_field_readers(value):
    from memory.interop import legacy_shapes as shapes

    cols, extra = read_value("hl", value)
    # The generic path, field by field, as read_value did before its short paths.
    want_cols, want_extra, absent = {}, {}, []
    for f in shapes.FIELDS["hl"]:
        if f.legacy not in value:
            absent.append(f.legacy)
            try:
                want_cols[f.column] = f.read(None, f.legacy)
            except BadValue:
                want_cols[f.column] = None
            continue
        col = f.read(value[f.legacy], f.legacy)
        want_cols[f.column] = col
        out = f.write(col)
        if out != value[f.legacy] or type(out) is not type(value[f.legacy]):
            if not (f.write is shapes.iso_js and shapes._canonical_js_time(value[f.legacy])):
                want_extra[f.legacy] = value[f.legacy]
    for k, v in value.items():
        if k not in shapes.LEGACY_NAMES["hl"]:
            want_extra[k] = v
    if absent:
        want_extra[shapes.ABSENT] = absent
    assert cols == want_cols
    assert extra == want_extra
    assert list(extra) == list(want_extra)


def test_read_value_bad_canonical_looking_time_still_raises():
    with pytest.raises(BadValue, match="created_at"):
        read_value("hl", {"mid": "m", "content": "x", "created_at": "2026-13-45T99:99:99.999Z"})


@pytest.mark.django_db
def test_insert_rows_writes_the_rows_bulk_create_writes(user):
    profile = Profile.objects.create(user=user, key="owner")
    at = datetime(2026, 10, 1, 12, tzinfo=UTC)
    slice_ = Slice.objects.create(profile=profile, key="2026-10-01-1200", started_at=at, last_message_at=at)
    values = [
        {"mid": f"{i}", "speaker": "user", "content": f"猫 {i}", "created_at": at, "legacy_key": f"msg:owner:{i}",
         "content_hash": "61", "legacy_extra": {"i": i}, "attachment": {"a": [1, 2]} if i % 2 else None,
         "deleted_at": at if i == 3 else None, "local_hour": 21}
        for i in range(5)
    ]
    Message.objects.bulk_create(
        Message(profile=profile, slice=slice_, **{**v, "mid": f"x{v['mid']}"}) for v in values
    )
    insert_rows(Message, [
        MessageRow(profile_id=profile.pk, slice_id=slice_.pk, **{**v, "mid": f"y{v['mid']}"}) for v in values
    ])
    cols = [f.attname for f in Message._meta.concrete_fields if f.attname not in ("id", "mid")]
    x = list(Message.objects.filter(mid__startswith="x").order_by("id").values_list(*cols))
    y = list(Message.objects.filter(mid__startswith="y").order_by("id").values_list(*cols))
    assert x == y
    assert len(y) == 5


@pytest.mark.django_db
def test_insert_rows_rows_break_constraints_like_any_insert(user):
    profile = Profile.objects.create(user=user, key="owner")
    row = FragmentRow(key="k", role="user", content="", ts=1, day_key="", hour=None, period="", fingerprint="f",
                      legacy_extra={}, profile_id=profile.pk)
    with pytest.raises(IntegrityError):
        insert_rows(LegacyFragment, [row, row])


@pytest.mark.django_db
def test_reserved_keys_are_never_a_deleted_rows_and_rows_inserted_with_them_point_at_each_other(user):
    """BENCH §5 (S4): a batch reserves its keys, so a reply names its line in the same INSERT
    with no read-back. The keys follow the table's high-water mark: the top row deleted, its key
    is not given again (a deleted line's key may still be named by what pointed at it)."""
    profile = Profile.objects.create(user=user, key="owner")
    at = datetime(2026, 10, 1, 12, tzinfo=UTC)
    slice_ = Slice.objects.create(profile=profile, key="2026-10-01-1200", started_at=at, last_message_at=at)
    top = Message.objects.create(profile=profile, slice=slice_, mid="top", speaker="user", content="x", created_at=at)
    Message.objects.filter(pk=top.pk).delete()
    rows = [MessageRow(mid=m, speaker=s, content=f"{m} 猫 🐱", created_at=at, legacy_key="", content_hash="61",
                       legacy_extra={}, profile_id=profile.pk, slice_id=slice_.pk)
            for m, s in (("q", "user"), ("a", "assistant"))]
    with transaction.atomic():
        pks = reserve_pks(Message, len(rows))
        for row, pk in zip(rows, pks, strict=True):
            row.pk = pk
        rows[1].reply_of_id = rows[0].pk
        insert_rows(Message, rows, with_pk=True)
    assert pks == [top.pk + 1, top.pk + 2]
    answer = Message.objects.get(mid="a")
    assert (answer.pk, answer.reply_of.mid) == (pks[1], "q")
    after = Message.objects.create(profile=profile, slice=slice_, mid="next", speaker="user", content="y", created_at=at)
    assert after.pk == pks[1] + 1  # the table's own counter moved past them


@pytest.mark.django_db(transaction=True)
def test_keys_are_reserved_only_inside_the_transaction_that_inserts_them():
    with pytest.raises(RuntimeError, match="inside the transaction"):
        reserve_pks(Message, 3)


@pytest.mark.django_db
def test_new_instance_is_the_model_made_from_its_values_and_saves_alike(user):
    profile = Profile.objects.create(user=user, key="p")
    slice_ = Slice.objects.create(profile=profile, key="2026-12-04-1200", started_at=datetime(2026, 12, 4, 12, tzinfo=UTC),
                                  last_message_at=datetime(2026, 12, 4, 12, tzinfo=UTC))
    plain = Message(profile=profile, slice=slice_, mid="c_00000000000000a1", speaker="user", content="你好 🐱",
                    created_at=datetime(2026, 12, 4, 12, 1, tzinfo=UTC), legacy_extra={"k": 1})
    values = [getattr(plain, f.attname) for f in Message._meta.concrete_fields]
    fast = new_instance(Message, values)
    assert type(fast) is Message and fast._state.adding and fast._state.db is None and fast.pk is None
    assert {f.attname: getattr(fast, f.attname) for f in Message._meta.concrete_fields} == {
        f.attname: getattr(plain, f.attname) for f in Message._meta.concrete_fields}
    assert fast.profile == profile and fast.slice == slice_  # the foreign keys resolve as usual
    fast.save()
    assert Message.objects.get(pk=fast.pk).content == "你好 🐱"


@pytest.mark.django_db
def test_new_instance_is_made_the_usual_way_for_a_receiver_of_the_init_signals():
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Message)
    try:
        made = new_instance(Message, [None] * len(Message._meta.concrete_fields))
    finally:
        post_init.disconnect(receiver, sender=Message)
    assert seen == [made]
