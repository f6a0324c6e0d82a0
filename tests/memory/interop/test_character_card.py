"""Character cards make a companion (SPEC H2, issue 27 point 5) and a companion leaves as one (H4)."""

import base64
import io
import json

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image

from memory.deletion import delete_profile
from memory.interop.character_card import (
    CardRefused,
    export_card_json,
    export_card_png,
    import_character_card,
    looks_like_card,
    read_card,
)
from memory.models import CompanionCard, LoreEntry, Message, Profile, Slice
from tests.factories import MessageFactory, SliceFactory
from tests.memory.interop.card_fixtures import (
    CHINESE_CARD,
    V2_CARD,
    as_v3,
    b64,
    picture,
    v2_png,
    v3_png,
    with_text_chunks,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media_in_tmp")]


@pytest.fixture
def person(django_user_model):
    return django_user_model.objects.create_user(username="mei", password="pw-mei-1234", first_name="Mei")


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_v2_png_card_makes_a_companion_with_persona_avatar_lorebook_and_greetings(person, tmp_path):
    report = import_character_card(write(tmp_path, "Seraphina.png", v2_png()), user=person)

    companion = Profile.objects.get(user=person, key="seraphina")
    assert report.created and report.profile_key == "seraphina" and report.spec == "chara_card_v2"
    assert companion.name == "Seraphina"
    persona = companion.persona
    assert persona.startswith("Seraphina is a guardian of the Eldoria forest")
    assert "She found Mei wounded" in persona  # {{user}} → the person's name
    assert "Personality: caring, protective, soft-spoken, fiercely loyal to Mei" in persona
    assert "Scenario: Mei wakes up in Seraphina's cottage" in persona
    assert "Write Seraphina's next reply in a gentle voice." in persona and "{{original}}" not in persona
    assert "Example dialogue:\n<START>\nMei: Where am I?\nSeraphina: *smiles* Safe." in persona
    assert "{{" not in persona
    # The avatar: re-encoded (no card chunk left in it), with a thumbnail.
    avatar = companion.avatar
    assert avatar["content_type"] == "image/png" and (avatar["width"], avatar["height"]) == (256, 384)
    with default_storage.open(avatar["path"], "rb") as fh:
        stored = Image.open(io.BytesIO(fh.read()))
        assert "chara" not in stored.info
    assert default_storage.exists(avatar["thumb"])
    # The lorebook, in the card's order, macros filled; the disabled entry kept, disabled.
    entries = list(LoreEntry.objects.for_profile(companion))
    assert [(e.keys, e.enabled) for e in entries] == [
        (["Eldoria", "forest"], True), (["Shadow beast", "SHADOWS"], True), (["amulet"], False)]
    assert entries[1].content == "Shadow beasts fear firelight; Seraphina keeps a lantern lit every night."
    assert entries[0].name == "The forest" and entries[0].extra["extensions"]["depth"] == 4
    # The first message opens the first conversation; the alternate greetings are its alternatives.
    lines = list(Message.objects.filter(profile=companion).order_by("id"))
    assert [m.content for m in lines] == [
        "*Seraphina leans over you, her hand glowing softly.* You're awake, Mei. Don't move too fast.",
        "*The fire crackles.* Mei, you slept for two days. I kept watch.",
        "*Seraphina hums while grinding herbs.* Oh! You're finally up.",
    ]
    assert [m.deleted_at is None for m in lines] == [True, False, False]
    assert {m.reply_of_id for m in lines} == {lines[0].pk}
    assert {m.slice_id for m in lines} == {Slice.objects.get(profile=companion).pk}
    assert report.greetings == 3 and report.kept_unused == ["post_history_instructions", "creator_notes"]


def test_a_v3_png_reads_its_ccv3_chunk_first(person, tmp_path):
    v3 = as_v3(V2_CARD)
    v3["data"]["description"] = "The V3 description of {{char}}."
    png = with_text_chunks(picture(), [("chara", b64(V2_CARD)), ("ccv3", b64(v3))])

    report = import_character_card(write(tmp_path, "s3.png", png), user=person)

    assert report.spec == "chara_card_v3"
    assert Profile.objects.get(user=person, key="seraphina").persona.startswith("The V3 description of Seraphina.")


def test_a_v3_png_without_a_v2_chunk_is_a_card_too(person, tmp_path):
    report = import_character_card(write(tmp_path, "only3.png", v3_png(with_v2=False)), user=person)

    assert report.spec == "chara_card_v3" and Profile.objects.get(user=person, key="seraphina").avatar


def test_a_json_card_in_chinese_makes_a_chinese_companion_without_an_avatar(person, tmp_path):
    path = write(tmp_path, "linwan.json", json.dumps(CHINESE_CARD, ensure_ascii=False).encode())

    report = import_character_card(path, user=person)

    companion = Profile.objects.get(user=person, key=report.profile_key)
    assert report.profile_key.startswith("card-") and companion.name == "林晚"
    assert companion.language == "zh" and companion.avatar is None
    assert companion.persona.startswith("林晚是一名在上海开书店的年轻女子，总是记得Mei喜欢的书。")
    assert "性格：温柔、细心、爱开玩笑" in companion.persona and "对话示例：\n<START>\nMei：有推荐的诗集吗？" in companion.persona
    assert Message.objects.live().get(profile=companion).content == "欢迎光临～Mei，今天想看点什么？"


def test_importing_the_same_card_again_updates_its_companion(person, tmp_path):
    import_character_card(write(tmp_path, "a.png", v2_png()), user=person)
    changed = json.loads(json.dumps(V2_CARD))
    changed["data"]["description"] = "{{char}} now runs the healers' hall."
    changed["data"]["character_book"]["entries"].pop()

    report = import_character_card(write(tmp_path, "b.png", v2_png(changed)), user=person)

    assert not report.created and report.profile_key == "seraphina"
    assert Profile.objects.filter(user=person).count() == 1
    companion = Profile.objects.get(user=person)
    assert companion.persona.startswith("Seraphina now runs the healers' hall.")
    assert LoreEntry.objects.for_profile(companion).count() == 2
    assert "persona" in report.changes and "lorebook" in report.changes and "avatar" not in report.changes
    assert Message.objects.filter(profile=companion).count() == 3  # the greetings were not written twice
    assert CompanionCard.objects.filter(profile=companion).count() == 1


def test_with_a_profile_key_the_card_updates_that_companion_and_keeps_its_history(person, tmp_path):
    own = Profile.objects.create(user=person, key="owner", name="Old name", language="en")
    slice_ = SliceFactory(profile=own, key="2026-01-01-1000")
    MessageFactory(profile=own, slice=slice_, mid="c_00000000000000aa", content="hello from before")

    report = import_character_card(write(tmp_path, "s.png", v2_png()), user=person, profile_key="owner")

    own.refresh_from_db()
    assert not report.created and own.name == "Seraphina" and own.avatar
    assert "already has conversations" in report.greetings_skipped
    assert list(Message.objects.filter(profile=own).values_list("content", flat=True)) == ["hello from before"]


def test_with_a_missing_profile_key_the_card_creates_it(person, tmp_path):
    report = import_character_card(write(tmp_path, "s.png", v2_png()), user=person, profile_key="forest")

    assert report.created and Profile.objects.get(user=person, key="forest").name == "Seraphina"


def test_a_dry_run_says_what_would_change_and_writes_nothing(person, tmp_path, settings):
    report = import_character_card(write(tmp_path, "s.png", v2_png()), user=person, dry_run=True)

    assert report.dry_run and report.created and report.changes == ["name", "persona", "avatar", "lorebook", "greetings"]
    assert report.lore_entries == 3 and report.lore_enabled == 2 and report.greetings == 3
    assert not Profile.objects.filter(user=person).exists() and not Message.objects.exists()
    assert not (tmp_path / "media").exists()


def test_a_persona_over_its_limit_is_refused_naming_the_limit_and_nothing_is_written(person, tmp_path, settings):
    settings.PREVIOUSLY_MAX_PERSONA_CHARS = 200

    with pytest.raises(CardRefused) as refused:
        import_character_card(write(tmp_path, "long.png", v2_png()), user=person)

    assert "long.png" in str(refused.value) and "the limit is 200 (PREVIOUSLY_MAX_PERSONA_CHARS)" in str(refused.value)
    assert not Profile.objects.exists() and not Message.objects.exists()


def _refusal(person, tmp_path, name: str, data: bytes) -> str:
    with pytest.raises(CardRefused) as refused:
        import_character_card(write(tmp_path, name, data), user=person)
    assert not Profile.objects.exists() and not Message.objects.exists() and not LoreEntry.objects.exists()
    assert not (tmp_path / "media").exists()
    return str(refused.value)


def test_a_png_without_a_card_is_refused(person, tmp_path):
    said = _refusal(person, tmp_path, "holiday.png", picture())
    assert said.startswith("holiday.png: this PNG holds no character card")
    assert said.endswith("Nothing was written.")


def test_a_card_chunk_that_is_not_base64_is_refused(person, tmp_path):
    said = _refusal(person, tmp_path, "broken.png", with_text_chunks(picture(), [("chara", "this is not base64!")]))
    assert said.startswith("broken.png: its “chara” text chunk is not base64.")


def test_a_card_chunk_that_is_base64_of_something_else_than_json_is_refused(person, tmp_path):
    junk = base64.b64encode(b"\xff\xfe not json").decode()
    said = _refusal(person, tmp_path, "junk.png", with_text_chunks(picture(), [("chara", junk)]))
    assert "junk.png: its “chara” text chunk is not UTF-8 text" in said
    half = base64.b64encode(json.dumps(V2_CARD).encode()[:200]).decode()
    said = _refusal(person, tmp_path, "cut.png", with_text_chunks(picture(), [("ccv3", half)]))
    assert "cut.png: its “ccv3” text chunk is not JSON" in said


@pytest.mark.parametrize(("data", "expected"), [
    (b'{"spec": "chara_card_v2", "data": {"name": "A"', "the file is not JSON"),
    (b"\xc3\x28 not utf-8", "the file is not UTF-8 text"),
    (b'{"hello": "world"}', "the JSON is not a character card"),
    (b'[1, 2, 3]', "the JSON is not a character card (not an object)"),
    (b'{"spec": "chara_card_v2", "data": {"name": ""}}', "the card has no name"),
    (b'{"spec": "chara_card_v2", "data": {"name": "A", "description": 5}}', "the field “description” is not text"),
    (b'{"spec": "chara_card_v2", "data": {"name": "A", "character_book": {"entries": [{"keys": "x", "content": "y"}]}}}',
     "character_book.entries[0]: “keys” is not a list of texts"),
    (b"", "the file is empty"),
])
def test_a_json_file_that_is_not_a_card_is_refused(person, tmp_path, data, expected):
    assert expected in _refusal(person, tmp_path, "card.json", data)


def test_a_lorebook_entry_over_its_limit_is_refused_naming_the_record(person, tmp_path, settings):
    settings.PREVIOUSLY_MAX_FIELD_CHARS = 50
    said = _refusal(person, tmp_path, "s.png", v2_png())
    assert "character_book.entries[0].content" in said and "(PREVIOUSLY_MAX_FIELD_CHARS)" in said


def test_a_card_file_over_the_size_limit_is_refused_before_it_is_read(person, tmp_path, settings):
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 1000
    said = _refusal(person, tmp_path, "big.png", v2_png())
    assert "a character card may be at most 1,000 (PREVIOUSLY_IMAGE_MAX_BYTES)" in said


def test_the_command_imports_and_refuses_with_the_files_name(person, tmp_path):
    path = write(tmp_path, "s.png", v2_png())
    report_path = tmp_path / "report.json"
    out = io.StringIO()

    call_command("import_character_card", str(path), "--user", "mei", "--dry-run", "--report-json", str(report_path), stdout=out)

    assert "would make companion 'seraphina'" in out.getvalue() and not Profile.objects.exists()
    assert json.loads(report_path.read_text())["lore_entries"] == 3
    call_command("import_character_card", str(path), "--user", "mei", stdout=io.StringIO())
    assert Profile.objects.get(user=person).name == "Seraphina"
    with pytest.raises(CommandError, match="plain.png: this PNG holds no character card"):
        call_command("import_character_card", str(write(tmp_path, "plain.png", picture())), "--user", "mei")


# --- leaving as a card (H4) ---------------------------------------------------------------------


def test_a_companion_made_from_a_card_exports_as_a_v2_png_that_reads_back(person, tmp_path):
    import_character_card(write(tmp_path, "s.png", v2_png()), user=person)
    companion = Profile.objects.get(user=person)
    with default_storage.open(companion.avatar["path"], "rb") as fh:
        avatar = fh.read()

    card = read_card(export_card_png(companion, image=avatar), name="out.png")

    assert card.spec == "chara_card_v2"
    assert card.data["name"] == "Seraphina"
    for field in ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt"):
        assert card.data[field] == V2_CARD["data"][field]  # macros intact: the persona was not rewritten
    assert card.data["alternate_greetings"] == V2_CARD["data"]["alternate_greetings"]
    entries = card.data["character_book"]["entries"]
    assert [(e["keys"], e["enabled"], e["comment"]) for e in entries] == [
        (["Eldoria", "forest"], True, "The forest"), (["Shadow beast", "SHADOWS"], True, "The enemy"),
        (["amulet"], False, "Disabled note")]
    assert card.data["character_book"]["scan_depth"] == 2
    assert Image.open(io.BytesIO(card.image)).size == (256, 384)


def test_a_companion_without_a_card_exports_its_persona_as_the_description(person):
    companion = Profile.objects.create(user=person, key="own", name="Aria", persona="Aria is curious.", language="en")

    png = read_card(export_card_png(companion), name="aria.png")
    as_json = read_card(export_card_json(companion), name="aria.json")

    assert png.data == as_json.data
    assert png.data["name"] == "Aria" and png.data["description"] == "Aria is curious."
    assert png.data["first_mes"] == "" and "character_book" not in png.data
    assert Image.open(io.BytesIO(png.image)).size == (400, 600)


def test_a_rewritten_persona_is_what_the_card_exports(person, tmp_path):
    import_character_card(write(tmp_path, "s.png", v2_png()), user=person)
    companion = Profile.objects.get(user=person)
    companion.persona = "Seraphina retired to the coast."
    companion.save()

    card = read_card(export_card_json(companion), name="x.json")

    assert card.data["description"] == "Seraphina retired to the coast." and card.data["personality"] == ""


def test_deleting_the_companion_removes_its_avatar_files(person, tmp_path, django_capture_on_commit_callbacks):
    import_character_card(write(tmp_path, "s.png", v2_png()), user=person)
    companion = Profile.objects.get(user=person)
    paths = [companion.avatar["path"], companion.avatar["thumb"]]

    with django_capture_on_commit_callbacks(execute=True):
        delete_profile(companion)

    assert not any(default_storage.exists(p) for p in paths)
    assert not CompanionCard.objects.exists() and not LoreEntry.objects.exists()


def test_detection_by_content_tells_a_card_from_other_files(tmp_path):
    assert read_card(v2_png()).name and read_card(v3_png(with_v2=False)).name
    assert read_card(write(tmp_path, "x.bin", json.dumps(CHINESE_CARD).encode())).name
    with pytest.raises(CardRefused):
        read_card(picture())
    assert not looks_like_card(b'[{"title": "a ChatGPT conversation", "mapping": {}}]')
    assert not looks_like_card(b'{"user_name": "Mei", "character_name": "Aria"}\n{"mes": "hi"}')


def test_a_card_picture_too_large_to_decode_is_refused_from_its_header(person, tmp_path):
    out = io.BytesIO()
    Image.new("1", (7000, 7000)).save(out, "PNG")  # 49 MP: small on disk, 200 MB decoded
    bomb = with_text_chunks(out.getvalue(), [("chara", b64(V2_CARD))])

    said = _refusal(person, tmp_path, "bomb.png", bomb)

    assert "bomb.png: the picture is too large (7000×7000 pixels)." in said


def test_a_v1_card_as_tavernai_wrote_it_makes_a_companion(person, tmp_path):
    v1 = {"name": "Old Tom", "description": "{{char}} keeps the lighthouse.", "personality": "gruff",
          "scenario": "", "first_mes": "Evening, {{user}}.", "mes_example": ""}

    report = import_character_card(write(tmp_path, "tom.json", json.dumps(v1).encode()), user=person)

    companion = Profile.objects.get(user=person, key="old-tom")
    assert report.spec == "v1" and companion.persona == "Old Tom keeps the lighthouse.\n\nPersonality: gruff"
    assert Message.objects.get(profile=companion).content == "Evening, Mei."


def test_import_history_recognises_a_card_by_content_and_makes_its_companion(person, tmp_path):
    """Issue 27 point 1: the history command takes a character card too (a PNG named like a chat)."""
    path = write(tmp_path, "export.json.png", v2_png())
    out = io.StringIO()
    call_command("import_history", str(path), "--user", "mei", "--dry-run", stdout=out)
    assert "would make companion 'seraphina'" in out.getvalue() and not Profile.objects.exists()
    call_command("import_history", str(path), "--user", "mei", stdout=io.StringIO())
    assert Profile.objects.get(user=person).name == "Seraphina"


def _history_refusal(tmp_path, name: str, data: bytes) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("import_history", str(write(tmp_path, name, data)), "--user", "mei", stdout=io.StringIO())
    assert not Profile.objects.exists() and not Message.objects.exists()
    said = str(refused.value)
    assert "not a ChatGPT, Claude, Open WebUI or SillyTavern export" not in said
    return said


def test_import_history_passes_a_png_without_a_card_its_own_refusal(person, tmp_path):
    said = _history_refusal(tmp_path, "holiday.png", picture())
    assert said.startswith("holiday.png: this PNG holds no character card")


def test_import_history_passes_a_card_chunk_that_is_not_base64_json_its_own_refusal(person, tmp_path):
    not_base64 = with_text_chunks(picture(), [("chara", "this is not base64 !!")])
    assert "bad.png: its “chara” text chunk is not base64." in _history_refusal(tmp_path, "bad.png", not_base64)
    not_json = with_text_chunks(picture(), [("chara", base64.b64encode(b"name: Seraphina").decode())])
    assert _history_refusal(tmp_path, "yaml.png", not_json).startswith("yaml.png: its “chara” text chunk is not JSON")


def test_import_history_passes_a_card_over_a_limit_its_own_refusal(person, tmp_path, settings):
    long_name = {**V2_CARD, "data": {**V2_CARD["data"], "name": "S" * 120}}
    said = _history_refusal(tmp_path, "long.json", json.dumps(long_name).encode())
    assert said.startswith("long.json: the name is 120 characters long")
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 1000
    said = _history_refusal(tmp_path, "big.png", v2_png())
    assert said.startswith("big.png: the file is ") and "(PREVIOUSLY_IMAGE_MAX_BYTES)" in said


def test_what_looks_like_a_card_is_a_png_or_a_cards_json_and_no_chat_export(tmp_path):
    assert looks_like_card(picture()) and looks_like_card(v2_png())
    assert looks_like_card(write(tmp_path, "c.json", b"\xef\xbb\xbf" + json.dumps(as_v3(V2_CARD)).encode()))
    assert looks_like_card(b'{"name": "Old Tom", "first_mes": "Evening."}')
    assert looks_like_card(b'{"spec": "chara_card_v2", "data": {"name": ')  # broken after its spec: the card's to refuse
    assert not looks_like_card(b'[{"title": "a ChatGPT conversation", "mapping": {}}]')
    assert not looks_like_card(b'{"user_name": "Mei", "character_name": "Aria", "create_date": "x"}\n{"mes": "hi"}')
    assert not looks_like_card(b"PK\x03\x04 a zip")
    assert not looks_like_card(tmp_path / "missing.json")
