"""A legacy import indexes its lines but does not embed them (issue 18: embedding happens in
`manage.py embed_backfill`, so the import keeps its speed, BENCH §3)."""

import pytest
from django.core.management import call_command

from memory.models import Message, RecallVector
from tests.memory.interop.conftest import msg

pytestmark = pytest.mark.django_db


def test_a_legacy_import_indexes_its_lines_but_leaves_embedding_to_the_backfill(dump_file, run_import):
    path = dump_file([
        msg("owner", "c_00000000000000b1", "user", "我的猫今天生病了", 1_760_968_800_000),
        msg("owner", "c_00000000000000b2", "user", "The vet said rest", 1_760_968_860_000),
    ])
    code, _ = run_import(path)
    assert code == 0
    imported = Message.objects.filter(mid__in=["c_00000000000000b1", "c_00000000000000b2"])
    assert imported.count() == 2
    assert not RecallVector.objects.filter(message__in=imported).exists()
    call_command("embed_backfill", verbosity=0)
    assert RecallVector.objects.filter(message__in=imported).count() == 2
