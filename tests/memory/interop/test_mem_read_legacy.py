"""P3: legacy `mem_*` lines are readable by `owner` only while MEM_READ_LEGACY is on; off, they
are kept but neither recalled nor shown, and the import says what it kept aside."""

from datetime import UTC, datetime

import pytest

from memory.models import LegacyFragment, Message, Profile
from memory.recall.context import recall
from previously.pages.chat.views import archive_page
from tests.memory.interop.conftest import mem, msg

pytestmark = pytest.mark.django_db
T = 1760968800000
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_mem_read_legacy_flips_both_ways(dump_file, run_import, settings):
    settings.MEM_READ_LEGACY = False
    code, out = run_import(dump_file([
        mem("mem_1760968800000_v0abc", "user", "我的老朋友叫阿岚 lanterns", T),
        msg("owner", "c_00000000000000e1", "user", "new lanterns for the balcony", T + 60_000),
    ]))
    assert code == 0
    assert "MEM_READ_LEGACY=0 — 1 line(s) from mem_ records kept aside" in out
    owner = Profile.objects.get(key="owner")
    old = Message.objects.get(legacy_key="mem_1760968800000_v0abc")
    assert LegacyFragment.objects.get().message == old  # stored, not dropped

    hidden = recall(profile=owner, query="阿岚 lanterns", now=NOW)
    assert [m.mid for m in hidden.fragments] == ["c_00000000000000e1"]
    assert [m.mid for m in archive_page(owner)[0]] == ["c_00000000000000e1"]
    assert not Message.objects.for_profile(owner).live().filter(pk=old.pk).exists()

    settings.MEM_READ_LEGACY = True
    shown = recall(profile=owner, query="阿岚 lanterns", now=NOW)
    assert old.mid in [m.mid for m in shown.fragments]
    assert old.mid in [m.mid for m in archive_page(owner)[0]]
