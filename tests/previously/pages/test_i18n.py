"""Interface strings in English and Chinese (issue 8 §7): the browser's language, a switcher,
and a committed .mo kept in step with its .po by the pure-Python compiler."""

import gettext
import io
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from previously.i18n import mo_bytes, parse_po
from tests.factories import ExperienceFactory
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db
PO = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"


def test_the_committed_mo_is_compiled_from_the_po():
    assert PO.with_suffix(".mo").read_bytes() == mo_bytes(parse_po(PO.read_text(encoding="utf-8"))), (
        "run `manage.py compile_translations` and commit locale/"
    )


def test_every_string_has_a_chinese_translation():
    catalog = gettext.GNUTranslations(io.BytesIO(mo_bytes(parse_po(PO.read_text(encoding="utf-8")))))._catalog
    untranslated = [k for k, v in catalog.items() if k and not v]
    assert untranslated == []
    assert len(catalog) > 200


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
