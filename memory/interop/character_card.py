"""Character cards in and out (SPEC H2, H4; HISTORY_FORMATS.md "Character cards").

In: a PNG whose `tEXt` chunk `ccv3` (V3) or `chara` (V2, or a V1 card) holds base64 JSON, or the
same JSON as a file; recognised by content, never by name. `import_character_card` makes a
companion of it, or updates one:

- the companion: `--profile KEY` names it (created if missing); without it, the companion the
  same card made before (`CompanionCard.identity`), else a new one keyed after the card's name;
- name = the card's name; persona = description, personality, scenario and system prompt, then
  the example dialogue, with `{{char}}` → the name and `{{user}}` → the person's name, within
  `limits.PERSONA`;
- the first message opens the companion's first conversation, the alternate greetings are its
  hidden alternatives (regenerate's "2 / 3": `reply_of` ties them; see `write_greetings`);
- the card's image becomes the avatar (re-encoded by `memory.images.store_avatar`);
- the lorebook's entries are stored (`LoreEntry`), for the prompt (`memory.lorebook`).

A file that is not a card, or a card whose text is not base64 JSON, is refused naming the file
and the problem (`CardRefused`), before anything is written; so is any text over its limit.

Out: `export_card_json` / `export_card_png` write a V2 card of a companion (its avatar as the
PNG, or a plain one), which `read_card` reads back.
"""

import base64
import binascii
import hashlib
import io
import json
import re
import struct
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ijson
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext
from PIL import Image, PngImagePlugin, UnidentifiedImageError

from memory import limits
from memory.archive import archive_message
from memory.deletion import hide_message
from memory.images import (
    ImageRefused,
    pixel_budget,
    prepare_avatar,
    remove_avatar_files,
    store_avatar,
)
from memory.models import CompanionCard, LoreEntry, Message, Profile
from memory.models.archive import PROFILE_KEY_RE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
V2, V3, V1 = "chara_card_v2", "chara_card_v3", "v1"
TEXT_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example",
               "creator_notes", "system_prompt", "post_history_instructions", "creator", "character_version")
NAME_MAX = 100  # Profile.name's column
MAX_GREETINGS = 100  # alternate greetings kept; more are refused
MAX_LORE_ENTRIES = 2000
KEY_MAX = 200  # one lorebook key
_MACRO = {"char": re.compile(r"\{\{\s*char\s*\}\}|<BOT>", re.IGNORECASE),
          "user": re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)}
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)  # SillyTavern's "the default prompt here"
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


class CardRefused(ValueError):
    """The file is not a card we take; `str()` names the file and the problem."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(gettext("%(file)s: %(problem)s Nothing was written.") % {"file": source, "problem": problem})


@dataclass
class ParsedCard:
    spec: str  # chara_card_v2, chara_card_v3 or v1
    data: dict  # the card's fields (V1's top level, V2/V3's `data`)
    image: bytes | None  # the PNG the card came in
    source: str

    def text(self, name: str) -> str:
        value = self.data.get(name)
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str:
        return self.text("name").strip()

    @property
    def greetings(self) -> list[str]:
        """The first message, then the alternate greetings (empty ones left out)."""
        alternates = self.data.get("alternate_greetings") or []
        return [g for g in [self.text("first_mes"), *alternates] if isinstance(g, str) and g.strip()]

    @property
    def book(self) -> dict:
        book = self.data.get("character_book")
        return book if isinstance(book, dict) else {}

    @property
    def entries(self) -> list[dict]:
        entries = self.book.get("entries") or []
        return entries if isinstance(entries, list) else []


# --- reading ------------------------------------------------------------------------------------


def read_card(source: str | Path | bytes, *, name: str = "") -> ParsedCard:
    """The card in `source` (a path or the file's bytes), checked; else `CardRefused`."""
    label = name or (Path(source).name if isinstance(source, (str, Path)) else "card")
    data = _read_bytes(source, label)
    if data.startswith(PNG_SIGNATURE):
        card_json, image = _from_png(data, label), data
    else:
        card_json, image = _decode_json(data, label, gettext("the file")), None
    parsed = _card_from_json(card_json, label, image)
    _check(parsed)
    return parsed


CARD_SNIFF_EVENTS = 5000  # JSON events looked at for a card's top-level keys before giving up
UTF8_BOM = b"\xef\xbb\xbf"


def looks_like_card(source: str | Path | bytes) -> bool:
    """Whether `source` presents itself as a character card, so that `import_history` hands it to
    `import_character_card`, whose refusal names the card's own problem: a PNG (with a card
    chunk or not), or a JSON object whose top-level keys are a card's (`spec` naming a
    `chara_card_…`, or V1's `name` beside `first_mes` or `description`). Read as a stream from
    its first bytes, never whole: a chat export is no object of these keys."""
    try:
        fh = io.BytesIO(source) if isinstance(source, bytes) else Path(source).open("rb")
    except OSError:
        return False
    with fh:
        head = fh.read(len(PNG_SIGNATURE))
        if head == PNG_SIGNATURE:
            return True
        fh.seek(len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0)
        return _card_shaped(fh)


def _card_shaped(fh) -> bool:
    keys: set[str] = set()
    try:
        for n, (prefix, event, value) in enumerate(ijson.parse(fh, multiple_values=True)):
            if n == 0 and event != "start_map":
                return False
            if prefix == "spec" and event == "string":
                return value.startswith("chara_card")
            if prefix == "" and event == "map_key":
                keys.add(value)
            if (prefix == "" and event == "end_map") or n > CARD_SNIFF_EVENTS:
                break
    except (ijson.JSONError, UnicodeDecodeError):
        pass  # a card broken after its keys is still the card's to refuse
    return "name" in keys and bool(keys & {"first_mes", "description"}) and not keys & {"user_name", "character_name"}


def _read_bytes(source, label: str) -> bytes:
    limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
    if isinstance(source, bytes):
        data = source
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
            if size > limit:
                raise CardRefused(label, _too_big(size, limit))
            data = path.read_bytes()
        except OSError as exc:
            raise CardRefused(label, gettext("cannot be read (%(error)s).") % {"error": exc.strerror or exc}) from None
    if len(data) > limit:
        raise CardRefused(label, _too_big(len(data), limit))
    if not data:
        raise CardRefused(label, gettext("the file is empty."))
    return data


def _too_big(size: int, limit: int) -> str:
    return gettext("the file is %(size)s bytes; a character card may be at most %(limit)s (PREVIOUSLY_IMAGE_MAX_BYTES).") % {
        "size": f"{size:,}", "limit": f"{limit:,}"}


def _from_png(data: bytes, label: str):
    """The JSON in the PNG's `ccv3` chunk (preferred, as SillyTavern reads it) or `chara`."""
    # The card chunk comes after the pixels, and Pillow decodes them to reach it: the size is
    # checked from the PNG's IHDR first (S4), before Pillow's own bomb check can refuse it vaguely.
    if len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        if width * height > pixel_budget()[0]:  # PREVIOUSLY_IMAGE_MAX_PIXELS
            raise CardRefused(label, gettext("the picture is too large (%(width)d×%(height)d pixels).") % {
                "width": width, "height": height})
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise CardRefused(label, gettext("not a PNG image."))
            # The card chunk comes after the pixels, and Pillow decodes them to reach it: the
            # size is checked from the header first (S4), as an upload's is.
            width, height = image.size
            if width * height > pixel_budget()[0]:  # PREVIOUSLY_IMAGE_MAX_PIXELS
                raise CardRefused(label, gettext("the picture is too large (%(width)d×%(height)d pixels).") % {
                    "width": width, "height": height})
            chunks = dict(getattr(image, "text", {}) or {})
    except CardRefused:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, zlib.error, Image.DecompressionBombError) as exc:
        raise CardRefused(label, gettext("the PNG cannot be read (%(error)s).") % {"error": exc}) from None
    for keyword in ("ccv3", "chara"):
        if keyword in chunks:
            raw = chunks[keyword]
            try:
                decoded = base64.b64decode("".join(str(raw).split()), validate=True)
            except (binascii.Error, ValueError):
                raise CardRefused(label, gettext("its “%(chunk)s” text chunk is not base64.") % {"chunk": keyword}) from None
            return _decode_json(decoded, label, gettext("its “%(chunk)s” text chunk") % {"chunk": keyword})
    raise CardRefused(label, gettext("this PNG holds no character card (no “chara” or “ccv3” text chunk)."))


def _decode_json(data: bytes, label: str, where: str):
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CardRefused(label, gettext("%(where)s is not UTF-8 text (byte %(at)s).") % {"where": where, "at": exc.start}) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardRefused(label, gettext("%(where)s is not JSON (%(error)s at line %(line)s, column %(column)s).") % {
            "where": where, "error": exc.msg, "line": exc.lineno, "column": exc.colno}) from None
    except RecursionError:
        raise CardRefused(label, gettext("%(where)s nests too deeply.") % {"where": where}) from None


def _card_from_json(obj, label: str, image: bytes | None) -> ParsedCard:
    if not isinstance(obj, dict):
        raise CardRefused(label, gettext("the JSON is not a character card (not an object)."))
    spec = obj.get("spec")
    if spec in (V2, V3):
        data = obj.get("data")
        if not isinstance(data, dict):
            raise CardRefused(label, gettext("the card has no “data” object."))
        return ParsedCard(spec=spec, data=data, image=image, source=label)
    if spec is None and isinstance(obj.get("name"), str) and ("first_mes" in obj or "description" in obj):
        return ParsedCard(spec=V1, data=obj, image=image, source=label)  # TavernAI's flat V1 card
    raise CardRefused(label, gettext("the JSON is not a character card (no spec “chara_card_v2” or “chara_card_v3”)."))


def _check(card: ParsedCard) -> None:
    """Every field of its type and within its limit; the record named (S6)."""
    label = card.source
    for name in TEXT_FIELDS:
        value = card.data.get(name)
        if value is not None and not isinstance(value, str):
            raise CardRefused(label, gettext("the field “%(field)s” is not text.") % {"field": name})
    if not card.name:
        raise CardRefused(label, gettext("the card has no name."))
    if len(card.name) > NAME_MAX:
        raise CardRefused(label, gettext("the name is %(length)s characters long; a companion’s name may have %(limit)s.") % {
            "length": len(card.name), "limit": NAME_MAX})
    alternates = card.data.get("alternate_greetings")
    if alternates is not None and (not isinstance(alternates, list) or not all(isinstance(g, str) for g in alternates)):
        raise CardRefused(label, gettext("“alternate_greetings” is not a list of texts."))
    if len(card.greetings) > MAX_GREETINGS + 1:
        raise CardRefused(label, gettext("the card has %(count)s greetings; at most %(limit)s are taken.") % {
            "count": len(card.greetings), "limit": MAX_GREETINGS + 1})
    for i, greeting in enumerate(card.greetings):
        _limit(limits.MESSAGE, greeting, label, "first_mes" if i == 0 else f"alternate_greetings[{i - 1}]")
    tags = card.data.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        raise CardRefused(label, gettext("“tags” is not a list of texts."))
    book = card.data.get("character_book")
    if book is None:
        return
    if not isinstance(book, dict) or not isinstance(book.get("entries", []), list):
        raise CardRefused(label, gettext("“character_book” is not a lorebook (an object with a list of entries)."))
    if len(card.entries) > MAX_LORE_ENTRIES:
        raise CardRefused(label, gettext("the lorebook has %(count)s entries; at most %(limit)s are taken.") % {
            "count": len(card.entries), "limit": MAX_LORE_ENTRIES})
    for i, entry in enumerate(card.entries):
        where = f"character_book.entries[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("content", ""), str):
            raise CardRefused(label, gettext("%(record)s is not a lorebook entry with a text “content”.") % {"record": where})
        for keys in ("keys", "secondary_keys"):
            value = entry.get(keys, [])
            if not isinstance(value, list) or not all(isinstance(k, str) and len(k) <= KEY_MAX for k in value):
                raise CardRefused(label, gettext("%(record)s: “%(field)s” is not a list of texts of at most %(limit)s characters.") % {
                    "record": where, "field": keys, "limit": KEY_MAX})
        _limit(limits.FIELD, entry.get("content", ""), label, f"{where}.content")


def _limit(limit: limits.TextLimit, text: str, label: str, record: str) -> None:
    try:
        limit.check(text, record=record)
    except limits.TextTooLong as exc:
        raise CardRefused(label, str(exc)) from None


# --- what the card makes -------------------------------------------------------------------------


def fill_macros(text: str, *, char: str, user: str) -> str:
    """`{{char}}` → the companion's name, `{{user}}` → the person's (any case; also <BOT>/<USER>)."""
    text = _MACRO["char"].sub(lambda _m: char, text)
    return _MACRO["user"].sub(lambda _m: user, text)


def card_language(card: ParsedCard) -> str:
    """zh when the card is written mostly in Chinese, else en."""
    sample = " ".join(card.text(f) for f in ("name", "description", "personality", "first_mes"))[:4000]
    letters = sum(1 for c in sample if c.isalpha())
    return "zh" if letters and len(_CJK.findall(sample)) * 3 >= letters else "en"


PERSONA_LABELS = {
    "en": {"personality": "Personality", "scenario": "Scenario", "examples": "Example dialogue"},
    "zh": {"personality": "性格", "scenario": "场景", "examples": "对话示例"},
}


def build_persona(card: ParsedCard, *, person: str, language: str) -> str:
    """The persona: description, personality, scenario and system prompt, then the example
    dialogue, with the macros filled."""
    words = PERSONA_LABELS["zh" if language == "zh" else "en"]
    colon = "：" if language == "zh" else ": "

    def filled(name: str) -> str:
        return fill_macros(card.text(name), char=card.name, user=person).strip()

    parts = [filled("description")]
    if filled("personality"):
        parts.append(f"{words['personality']}{colon}{filled('personality')}")
    if filled("scenario"):
        parts.append(f"{words['scenario']}{colon}{filled('scenario')}")
    system = _ORIGINAL.sub("", filled("system_prompt")).strip()
    if system:
        parts.append(system)
    if filled("mes_example"):
        parts.append(f"{words['examples']}{colon.strip()}\n{filled('mes_example')}")
    return "\n\n".join(p for p in parts if p)


def card_identity(card: ParsedCard) -> str:
    """The same card imported again has the same identity: its name and creator (or, without a
    creator, its name and first message)."""
    second = card.text("creator").strip() or card.text("first_mes")
    return hashlib.sha256(f"{card.name}\n{second}".encode()).hexdigest()


def person_name(user) -> str:
    return (user.get_full_name() or "").strip() or user.get_username()


@dataclass
class CardReport:
    """What an import did (or, dry, would do); `as_dict()` for JSON and the pages."""

    file: str
    card_name: str
    spec: str
    profile_key: str
    created: bool  # a new companion
    dry_run: bool
    persona_chars: int = 0
    changes: list[str] = field(default_factory=list)  # the fields that change: name, persona, avatar, lorebook, greetings
    lore_entries: int = 0
    lore_enabled: int = 0
    greetings: int = 0  # first message + alternatives written (0: none, or the companion had lines)
    greetings_skipped: str = ""  # why the greetings were not written
    avatar: bool = False
    kept_unused: list[str] = field(default_factory=list)  # card fields kept but not used in the prompt

    def as_dict(self) -> dict:
        return asdict(self)


def import_character_card(
    source: str | Path | bytes, *, user, profile_key: str | None = None, dry_run: bool = False, name: str = "",
) -> CardReport:
    """Make or update a companion from a character card (H2); `dry_run` writes nothing and says
    what would change. `CardRefused` names the file and the problem; nothing is written then."""
    card = read_card(source, name=name)
    label = card.source
    if profile_key is not None and not PROFILE_KEY_RE.fullmatch(profile_key):
        raise CardRefused(label, gettext("“%(key)s” is not a companion key (1–32 of a–z, 0–9, “_” or “-”).") % {"key": profile_key[:40]})
    identity = card_identity(card)
    profile = _target(user, profile_key, identity)
    language = profile.language if profile is not None else card_language(card)
    person = person_name(user)
    persona = build_persona(card, person=person, language=language)
    _limit(limits.PERSONA, persona, label, gettext("the persona built from the card"))
    key = profile.key if profile is not None else (profile_key or _free_key(user, card, identity))
    has_lines = profile is not None and Message.objects.filter(profile=profile).exists()
    report = CardReport(
        file=label, card_name=card.name, spec=card.spec, profile_key=key, created=profile is None, dry_run=dry_run,
        persona_chars=len(persona), lore_entries=len(card.entries),
        lore_enabled=sum(1 for e in card.entries if e.get("enabled", True) is not False),
        avatar=card.image is not None,
        kept_unused=[f for f in ("post_history_instructions", "creator_notes") if card.text(f).strip()],
    )
    prepared = None  # the picture checked, re-encoded and thumbnailed before any write (S6)
    if card.image is not None:
        try:
            prepared = prepare_avatar(card.image, name=label)
        except ImageRefused as exc:
            raise CardRefused(label, gettext("its image cannot be used: %(reason)s") % {"reason": exc.reason}) from None
    report.changes = _changes(profile, card, persona, prepared.image.sha256 if prepared else None)
    if card.greetings and not has_lines and profile is not None:
        report.changes.append("greetings")
    if has_lines:
        report.greetings_skipped = gettext("the companion already has conversations; its first one stays as it is.")
    else:
        report.greetings = len(card.greetings)
    if dry_run:
        return report
    with transaction.atomic():
        if profile is None:
            profile = Profile.objects.create(user=user, key=key, name=card.name, persona=persona, language=language)
        stored_avatar = store_avatar(profile=profile, avatar=prepared) if prepared else None
        try:
            _apply(profile, card, persona=persona, identity=identity, avatar=stored_avatar, greet=not has_lines,
                   person=person)
        except BaseException:
            if stored_avatar:
                remove_avatar_files(profile.pk, stored_avatar)
            raise
    return report


def _target(user, profile_key: str | None, identity: str) -> Profile | None:
    if profile_key is not None:
        return Profile.objects.filter(user=user, key=profile_key).first()
    found = CompanionCard.objects.filter(profile__user=user, identity=identity).select_related("profile").first()
    return found.profile if found else None


def _free_key(user, card: ParsedCard, identity: str) -> str:
    base = re.sub(r"[^a-z0-9_-]+", "-", card.name.lower()).strip("-_")[:24] or f"card-{identity[:8]}"
    taken = set(Profile.objects.filter(user=user, key__startswith=base).values_list("key", flat=True))
    key, n = base, 2
    while key in taken:
        key, n = f"{base}-{n}", n + 1
    return key


def _changes(profile: Profile | None, card: ParsedCard, persona: str, image_sha: str | None) -> list[str]:
    if profile is None:
        return ["name", "persona", *(["avatar"] if card.image else []), *(["lorebook"] if card.entries else []),
                *(["greetings"] if card.greetings else [])]
    changes = []
    if profile.name != card.name:
        changes.append("name")
    if profile.persona != persona:
        changes.append("persona")
    if image_sha is not None and (profile.avatar or {}).get("sha256") != image_sha:
        changes.append("avatar")
    stored = [(e.keys, e.content, e.enabled) for e in LoreEntry.objects.for_profile(profile)]
    if stored != [(_keys(e, "keys"), e.get("content", ""), e.get("enabled", True) is not False) for e in card.entries]:
        changes.append("lorebook")
    return changes


def _keys(entry: dict, name: str) -> list[str]:
    return [k for k in entry.get(name, []) if isinstance(k, str) and k.strip()]


def _apply(profile: Profile, card: ParsedCard, *, persona: str, identity: str, avatar: dict | None, greet: bool,
           person: str) -> None:
    old_avatar = profile.avatar
    profile.name, profile.persona = card.name, persona
    fields = ["name", "persona"]
    if avatar is not None:
        profile.avatar = avatar
        fields.append("avatar")
    profile.save(update_fields=fields)
    if avatar is not None and old_avatar and old_avatar.get("path") != avatar.get("path"):
        transaction.on_commit(lambda: remove_avatar_files(profile.pk, old_avatar))
    data = {k: v for k, v in card.data.items() if k != "character_book"}
    book = {k: v for k, v in card.book.items() if k != "entries"}
    CompanionCard.objects.update_or_create(
        profile=profile,
        defaults={"identity": identity, "spec": card.spec, "data": data, "book": book, "persona_built": persona,
                  "source_name": card.source[:200], "imported_at": timezone.now()},
    )
    LoreEntry.objects.filter(profile=profile).delete()
    LoreEntry.objects.bulk_create([_entry(profile, i, e, card.name, person) for i, e in enumerate(card.entries)])
    if greet:
        write_greetings(profile, [fill_macros(g, char=card.name, user=person) for g in card.greetings], identity=identity)


LORE_COLUMNS = {"keys", "secondary_keys", "content", "enabled", "constant", "selective", "case_sensitive",
                "insertion_order", "priority", "name"}


def _entry(profile: Profile, position: int, entry: dict, char: str, person: str) -> LoreEntry:
    def integer(name: str, default: int) -> int:
        value = entry.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**31 else default

    return LoreEntry(
        profile=profile, position=position,
        name=str(entry.get("name") or entry.get("comment") or "")[:200],
        keys=_keys(entry, "keys"), secondary_keys=_keys(entry, "secondary_keys"),
        content=fill_macros(entry.get("content", ""), char=char, user=person),
        enabled=entry.get("enabled", True) is not False,
        constant=entry.get("constant") is True, selective=entry.get("selective") is True,
        case_sensitive=entry.get("case_sensitive") is True,
        insertion_order=integer("insertion_order", 100), priority=integer("priority", 0),
        extra={k: v for k, v in entry.items() if k not in LORE_COLUMNS},
    )


def write_greetings(profile: Profile, greetings: list[str], *, identity: str) -> list[Message]:
    """The first greeting opens the companion's first conversation; the others are its hidden
    alternatives. As regenerate's replies share their user line in `reply_of`, the greetings
    share the first one (which names itself), so the chat offers them as "1 / 3"."""
    if not greetings:
        return []
    now = timezone.now()
    stamp = int(now.timestamp() * 1000)
    written = []
    for i, text in enumerate(greetings):
        archived = archive_message(
            profile=profile, mid=f"a_{stamp}_g{identity[:10]}{i:02d}", speaker=Message.Speaker.ASSISTANT,
            content=text, created_at=now, tz=profile.tz or None, source_id=f"card:{identity[:16]}:greeting:{i}",
        )
        written.append(archived.message)
    first = written[0]
    Message.objects.filter(pk__in=[m.pk for m in written]).update(reply_of=first)
    for message in written[1:]:
        hide_message(message, at=now)
    return written


# --- out: a companion as a V2 card (H4) --------------------------------------------------------

EXPORT_SIZE = (400, 600)  # SillyTavern's card picture; used when the companion has no avatar
EXPORT_COLOUR = (74, 96, 128)


def export_card(profile: Profile) -> dict:
    """The companion as a V2 card: its card's own fields while the persona is the one the card
    built (macros intact), else the persona as the description; its name, greetings and lorebook."""
    stored = CompanionCard.objects.filter(profile=profile).first()
    original = dict(stored.data) if stored else {}
    unchanged = stored is not None and profile.persona == stored.persona_built
    data = {name: original.get(name, "") if unchanged else "" for name in TEXT_FIELDS}
    data.update({
        "name": profile.display_name,
        "description": original.get("description", "") if unchanged else profile.persona,
        "first_mes": original.get("first_mes", "") if stored else "",
        "creator_notes": original.get("creator_notes", "") if stored else "",
        "creator": original.get("creator", "") if stored else "",
        "character_version": original.get("character_version", "") if stored else "",
        "alternate_greetings": list(original.get("alternate_greetings") or []) if stored else [],
        "tags": list(original.get("tags") or []) if stored else [],
        "extensions": {**(original.get("extensions") or {}), "previously": {"key": profile.key}}
        if isinstance(original.get("extensions", {}), dict) else {"previously": {"key": profile.key}},
    })
    entries = list(LoreEntry.objects.for_profile(profile))
    if entries:
        book = dict(stored.book) if stored else {}
        book.setdefault("extensions", {})
        book["entries"] = [
            {**e.extra, "keys": e.keys, "secondary_keys": e.secondary_keys, "content": e.content,
             "enabled": e.enabled, "constant": e.constant, "selective": e.selective,
             "case_sensitive": e.case_sensitive, "insertion_order": e.insertion_order, "priority": e.priority,
             "name": e.name, "id": e.extra.get("id", e.position), "extensions": e.extra.get("extensions", {})}
            for e in entries
        ]
        data["character_book"] = book
    return {"spec": V2, "spec_version": "2.0", "data": data}


def export_card_json(profile: Profile) -> bytes:
    return json.dumps(export_card(profile), ensure_ascii=False, indent=2).encode()


def export_card_png(profile: Profile, *, image: bytes | None = None) -> bytes:
    """The V2 card in a PNG's `chara` text chunk, the picture being the avatar (`image`) or a
    plain one; SillyTavern and `read_card` read it back."""
    payload = base64.b64encode(json.dumps(export_card(profile), ensure_ascii=False).encode()).decode("ascii")
    info = PngImagePlugin.PngInfo()
    info.add_text("chara", payload)
    out = io.BytesIO()
    if image:
        with Image.open(io.BytesIO(image)) as picture:
            picture.seek(0)
            frame = picture if picture.mode in ("RGB", "RGBA", "L", "LA", "P") else picture.convert("RGBA")
            frame.save(out, "PNG", pnginfo=info)
    else:
        Image.new("RGB", EXPORT_SIZE, EXPORT_COLOUR).save(out, "PNG", pnginfo=info)
    return out.getvalue()
