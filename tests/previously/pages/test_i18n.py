"""Interface strings in English and Chinese (issue 8 §7, issue 14 §4): the browser's language, a
switcher, one translation system (Django's gettext; catalogues compiled by a maintained tool)."""

import os
import re
import shutil
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from django.utils import translation

from tests.factories import ExperienceFactory
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db
BASE = Path(settings.BASE_DIR)
LOCALE = BASE / "locale"
CATALOGUES = sorted(LOCALE.glob("*/LC_MESSAGES/django.po"))
ZH = LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po"
# What `makemessages` reads for the catalogue: the project's packages and templates, wherever
# they live (tests, benchmarks, scripts and static files hold no interface text).
NOT_SOURCES = {"tests", "bench", "scripts", "static", "locale", "var", "build", "node_modules"}


def catalogue(po: Path):
    with po.open("rb") as f:
        return read_po(f)


def entries(po: Path):
    return [m for m in catalogue(po) if m.id]


def key(message) -> tuple[str | None, str]:
    return message.context, message.id if isinstance(message.id, str) else message.id[0]


def test_there_is_a_chinese_catalogue_and_every_language_has_one():
    assert ZH in CATALOGUES
    codes = {translation.to_locale(code) for code, _name in settings.LANGUAGES}
    assert codes - {"en"} <= {po.parts[-3] for po in CATALOGUES}


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.parts[-3])
def test_every_msgid_has_a_translation(po):
    """No empty msgstr (nor an empty plural form) and no fuzzy entry: msgfmt would drop it and
    the page would fall back to English (a fuzzy header drops the whole catalogue)."""
    assert not catalogue(po).fuzzy, f"{po.relative_to(BASE)}: drop '#, fuzzy' from the header"
    missing = [
        key(m) for m in entries(po)
        if m.fuzzy or not all(m.string if isinstance(m.string, tuple) else (m.string,))
    ]
    assert missing == [], f"translate these in {po.relative_to(BASE)} (and drop '#, fuzzy'): {missing}"
    assert len(entries(po)) > 300


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.parts[-3])
def test_the_compiled_catalogue_is_the_po(po):
    """The .mo Django loads is a generated file (`make install`, or `manage.py compilemessages`):
    every entry of the .po reads back through gettext."""
    language = translation.to_language(po.parts[-3])
    stale = []
    with translation.override(language):
        for m in entries(po):
            if isinstance(m.id, tuple):
                got = translation.npgettext(m.context, *m.id, 1) if m.context else translation.ngettext(*m.id, 1)
                want = m.string[0]
            else:
                got = translation.pgettext(m.context, m.id) if m.context else translation.gettext(m.id)
                want = m.string
            if got != want:
                stale.append(key(m))
    assert stale == [], f"{po.with_suffix('.mo').relative_to(BASE)} is stale or missing: run `make install`"


@pytest.mark.skipif(
    shutil.which("xgettext") is None and not os.environ.get("CI"),
    reason="GNU gettext's xgettext is not installed (.ci/run installs it; CI fails without it)",
)
def test_every_marked_string_is_in_the_catalogue(tmp_path, monkeypatch, settings):
    """`makemessages` on a copy of the sources finds exactly the committed catalogue's msgids:
    a string marked for translation but never added to the .po (or a stale entry) fails here."""
    sources = [d for d in BASE.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name not in NOT_SOURCES]
    for source in sources:
        shutil.copytree(source, tmp_path / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.mo", "*.po"))
    (tmp_path / "locale").mkdir()
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    monkeypatch.chdir(tmp_path)
    call_command("makemessages", locale=["zh_Hans"], no_location=True, verbosity=0)

    extracted = {key(m) for m in entries(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po")}
    committed = {key(m) for m in entries(ZH)}
    assert sorted(extracted - committed, key=str) == [], "run `manage.py makemessages -a` and translate"
    assert sorted(committed - extracted, key=str) == [], "stale entries: run `manage.py makemessages -a --no-obsolete`"


# Text that is not interface text: prompt data for the model (chosen per profile language, kept
# byte-identical within a slice, SPEC R5/K9), words the user may type or the card may contain,
# the language's own name in Profile.Language.
NOT_INTERFACE = {
    "previously/chat/prompt.py", "previously/chat/proactive.py",
    "previously/agent/analyzer.py", "previously/agent/briefing.py", "memory/clock.py",
    "memory/card/inject.py", "memory/card/directives.py", "memory/card/mutations.py",
    "memory/models/archive.py", "memory/proactive.py", "memory/recall/tokenize.py",
    "memory/recall/rank.py", "memory/recall/context.py", "memory/interop/legacy/kinds.py",
    "memory/interop/character_card.py",  # the persona's section labels, built in the card's language (H2)
}
HAN = re.compile(r"[\u4e00-\u9fff]")


def test_no_chinese_interface_text_outside_the_catalogue():
    """Chinese reaches the interface only through locale/: no template, script or Python module
    spells it (apart from the listed prompt data and user-side words), and no template branches
    on the language."""
    files = [*BASE.glob("templates/**/*.html"), *BASE.glob("memory/templates/**/*.html"),
             *BASE.glob("static/previously/*.js"), *BASE.glob("previously/**/*.py"), *BASE.glob("memory/**/*.py")]
    spelled = []
    for path in files:
        rel = path.relative_to(BASE).as_posix()
        if rel in NOT_INTERFACE or "/migrations/" in rel:
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".html":
            text = re.sub(r"\{%\s*(translate|blocktranslate).*?%\}", "", text)  # examples in msgids
        if HAN.search(text) or re.search(r"\blang(uage)?\s*==", text):
            spelled.append(rel)
    assert spelled == []


@pytest.mark.parametrize("name", ["home", "archive", "timeline", "beliefs", "profiles", "about", "data", "card"])
def test_pages_follow_a_chinese_browser(logged_in, profile, name):
    html = logged_in.get(reverse(name), headers={"accept-language": "zh-CN,zh;q=0.9"}).content.decode()
    assert '<html lang="zh-hans">' in html
    assert ">聊天<" in html and ">时间线<" in html and ">前情提要<" in html and ">退出登录<" in html
    assert_no_inline_script(html)


def test_pages_follow_an_english_browser(logged_in, profile):
    html = logged_in.get(reverse("timeline"), headers={"accept-language": "en-GB,en"}).content.decode()
    assert '<html lang="en">' in html and ">Timeline<" in html


def test_the_switcher_sets_the_language(logged_in, profile):
    response = logged_in.post(reverse("set_language"), {"language": "zh-hans", "next": reverse("beliefs")})
    assert response.status_code == 302 and response.url == reverse("beliefs")
    ExperienceFactory(profile=profile, title="Moved", status="candidate")
    html = logged_in.get(reverse("beliefs"), headers={"accept-language": "en"}).content.decode()
    assert "待确认的经历" in html and ">确认<" in html


def test_plural_forms_render_in_chinese(logged_in, profile):
    from memory.archive import archive_message

    archive_message(profile=profile, mid="c_00000000000000d1", speaker="user", content="去海边")
    html = logged_in.get(reverse("profile_delete", args=["owner"]), headers={"accept-language": "zh"}).content.decode()
    assert "1 条消息" in html and "此操作无法撤销。" in html


@pytest.mark.parametrize(("browser", "language", "nav", "chat"), [
    ("en", "zh", ">Timeline<", ">新对话<"),
    ("zh-CN", "en", ">时间线<", ">New conversation<"),
])
def test_the_chat_speaks_the_profiles_language_and_the_nav_the_browsers(logged_in, profile, browser, language, nav, chat):
    """The chat's own lines follow the companion's language (`{% language %}`), the navigation
    and the script's messages the browser's."""
    profile.language = language
    profile.save()
    html = logged_in.get(reverse("home"), headers={"accept-language": browser}).content.decode()
    assert nav in html and chat in html
    too_large = "图片太大（上限 {limit} MB）" if browser == "zh-CN" else "Image too large (limit {limit} MB)"
    assert f'data-too-large="{too_large}"' in html


def test_model_and_admin_names_are_translated(admin_client, profile):
    from memory.models import Experience, Message

    ExperienceFactory(profile=profile, title="Moved", status="candidate")
    with translation.override("zh-hans"):
        assert str(Message._meta.verbose_name_plural) == "消息"
        assert str(Experience._meta.get_field("recorded_at").verbose_name) == "记录于"
    with translation.override("en"):
        assert str(Experience._meta.get_field("recorded_at").verbose_name) == "recorded at"
    html = admin_client.get(reverse("admin:memory_experience_changelist"), headers={"accept-language": "zh"}).content.decode()
    assert "确认所选的候选经历" in html and "<title>选择 经历 来修改" in html
