"""SPEC O6: backups taken while people chat, restores that keep the forget promise."""

import sqlite3
import threading
from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessLog
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone

from memory import backups, forget_journal, server_lock
from memory.accounts import delete_account, seen
from memory.archive import archive_message
from memory.card import parse
from memory.card.lines import card_lines
from memory.deletion import delete_message, delete_profile, delete_slice, purge_soft_deleted
from memory.hashing import content_hash
from memory.models import (
    Card,
    Experience,
    ExperienceHistory,
    Highlight,
    Invitation,
    LegacyFragment,
    Message,
    Profile,
    Relation,
    Tombstone,
)
from previously.housekeeping import take_scheduled_backup
from tests.factories import (
    ExperienceFactory,
    HighlightFactory,
    MessageFactory,
    ProfileFactory,
    RelationFactory,
)
from tests.memory.test_forget_audit import dump_all_tables
from tests.memory.test_forget_card import card_citing
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db(transaction=True)

LINES = ["今天去了海边，风很大 🌊", "I finally finished the bridge chapter of my novel", "明天要早起去面试",
         "Mixed 中文 and English, with an emoji 😀", "My sister Ana moves to Lisbon in May"]


@pytest.fixture(autouse=True)
def scratch_database(tmp_path):
    """On SQLite each test backs up and restores a scratch copy of the (empty) test database,
    never the worker's own file: a restore rewrites every page of the file it is given, and the
    worker's file outlives this test (its live servers, its later tests)."""
    if connection.vendor != "sqlite":
        yield
        return
    own = connection.settings_dict["NAME"]
    scratch = tmp_path / "scratch.sqlite3"
    source = sqlite3.connect(own)
    target = sqlite3.connect(scratch)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    connections.close_all()
    connection.settings_dict["NAME"] = str(scratch)
    try:
        yield
    finally:
        connections.close_all()
        connection.settings_dict["NAME"] = own


@pytest.fixture
def folder(settings, tmp_path):
    settings.PREVIOUSLY_BACKUP_DIR = str(tmp_path / "backups")
    settings.VAR_DIR = tmp_path  # the server lock of this test only
    return tmp_path / "backups"


def _say(profile, n, *, start=0, text=None):
    base = timezone.now() - timedelta(hours=1)
    for i in range(start, start + n):
        archive_message(profile=profile, mid=f"c_{i:016x}", speaker="user",
                        content=text or f"{LINES[i % len(LINES)]} #{i}", created_at=base + timedelta(seconds=i))


def _copy_mids(backup) -> set[str]:
    if backup.engine != "sqlite":
        pytest.skip("reads the copy with sqlite3")
    db = sqlite3.connect(backup.path)
    try:
        return {row[0] for row in db.execute("SELECT mid FROM memory_message")}
    finally:
        db.close()


class Writer(threading.Thread):
    """Writes one line after another (another thread, its own database connection, as the
    server's chat does) until stopped; `written` counts the lines committed, in order."""

    FIRST = 1000

    def __init__(self, profile):
        super().__init__()
        self.profile = profile
        self.written = 0
        self.stop = threading.Event()
        self.changed = threading.Condition()
        self.error: BaseException | None = None

    def run(self):
        try:
            while not self.stop.is_set() and self.written < 5000:
                _say(self.profile, 1, start=self.FIRST + self.written)
                with self.changed:
                    self.written += 1
                    self.changed.notify_all()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
        finally:
            connection.close()

    def wait_past(self, count: int) -> int:
        """Block until more than `count` lines are committed; how many are then."""
        with self.changed:
            assert self.changed.wait_for(lambda: self.written > count or self.error or not self.is_alive(),
                                         timeout=120), "the writer stopped writing"
            assert self.error is None, self.error
            return self.written


def test_a_backup_taken_while_lines_are_written_passes_its_check_and_holds_every_line_committed_before(
        folder, monkeypatch):
    """Issue 28 point 3 acceptance, O6: a backup taken while another thread writes lines. The
    writer is made to commit lines after the backup started and before its copy (they are in
    it), and again after the copy and before the backup finished (they are not): so the writes
    overlapped the backup, by facts of order, not by timing. The copy passes `integrity_check`
    and holds every line committed before the backup started, and of the writer's lines
    exactly a prefix, ending between the copy's start and its end (one consistent state)."""
    profile = ProfileFactory(key="owner")
    _say(profile, 40)
    before = set(Message.objects.values_list("mid", flat=True))
    copy_name = "_sqlite_copy" if connection.vendor == "sqlite" else "_pg_dump"
    real_copy = getattr(backups, copy_name)
    seen = {}

    def copy_while_written(*args):
        seen["copy_started"] = writer.wait_past(seen["backup_started"] + 2)  # 3 more, since the start
        real_copy(*args)
        seen["copy_done"] = writer.written
        seen["backup_ends"] = writer.wait_past(seen["copy_done"] + 2)  # 3 more before it finishes

    monkeypatch.setattr(backups, copy_name, copy_while_written)
    writer = Writer(profile)
    writer.start()
    try:
        seen["backup_started"] = writer.wait_past(2)  # some written before the backup starts
        backup = backups.make_backup()
        seen["backup_done"] = writer.written
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error

    # The writes overlapped the backup: before it, between its start and its copy, after the
    # copy and before it returned.
    assert 0 < seen["backup_started"] < seen["copy_started"] <= seen["copy_done"] < seen["backup_ends"]
    assert seen["backup_ends"] <= seen["backup_done"]
    assert backup.path.exists() and backup.bytes > 0
    assert backups.last_backup() == backup
    if backup.engine == "sqlite":
        assert backups.sqlite_problem(backup.path) is None
        copied = _copy_mids(backup)
        assert before <= copied
        written = sorted(int(mid[2:], 16) - Writer.FIRST for mid in copied - before)
        assert written == list(range(len(written))), "not a prefix of the writer's lines"
        assert seen["copy_started"] <= len(written) <= seen["copy_done"] < seen["backup_ends"]


def test_restore_deletes_again_what_was_deleted_for_good_after_the_backup(folder):
    profile = ProfileFactory(key="owner")
    _say(profile, 6)
    backup = backups.make_backup()
    secret = Message.objects.get(mid=f"c_{3:016x}")
    words = secret.content
    delete_message(profile=profile, mid=secret.mid, hard=True, force=True)
    _say(profile, 2, start=10)  # written after the backup: lost by the restore, as the prompt says

    report = backups.restore(backup.path)

    assert report.reapplied == {"msg": 1}
    assert not Message.objects.filter(mid=secret.mid).exists()
    assert not Message.objects.filter(content=words).exists()
    assert Tombstone.objects.filter(kind="msg", object_id=secret.mid).exists()
    assert Message.objects.filter(profile__key="owner").count() == 5  # the other lines came back
    assert words.encode() not in forget_journal.journal_path().read_bytes()


def test_restore_deletes_again_a_companion_deleted_after_the_backup(folder):
    profile = ProfileFactory(key="friend")
    _say(profile, 3)
    backup = backups.make_backup()
    delete_profile(profile)
    report = backups.restore(backup.path)
    assert report.reapplied == {"profile": 1}
    assert not Profile.objects.filter(key="friend").exists()
    assert not Message.objects.exists()


def test_restore_deletes_again_an_account_deleted_after_the_backup_as_delete_account_does_issue28_o6(
        folder, django_user_model):
    name = "lin-林"
    user = django_user_model.objects.create_user(username=name, password="pw-lin-12345")
    _say(ProfileFactory(user=user, key="owner"), 2)
    staff = django_user_model.objects.create_user(username="root", password="pw-root-123", is_staff=True)
    invitation = Invitation.issue(by=staff, days=7, note="for Lin 林 (her sister's friend)")[0]
    Invitation.objects.filter(pk=invitation.pk).update(used_at=timezone.now(), used_by=user)
    AccessAttempt.objects.create(username=name, ip_address="10.0.0.9", user_agent="ua", failures_since_start=2)
    AccessLog.objects.create(username=name, ip_address="10.0.0.9", user_agent="ua")
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session.create()
    seen(user=user, session_key=session.session_key, user_agent="Firefox", ip_address="10.0.0.9")
    backup = backups.make_backup()
    delete_account(user)

    report = backups.restore(backup.path)

    assert report.reapplied == {"profile": 1, "account": 1}
    assert not django_user_model.objects.filter(username=name).exists()
    assert not AccessAttempt.objects.filter(username=name).exists()
    assert not AccessLog.objects.filter(username=name).exists()
    assert not Session.objects.filter(session_key=session.session_key).exists()
    used = Invitation.objects.get(pk=invitation.pk)
    assert (used.note, used.used_by, used.used_at is not None) == ("", None, True)  # it stays used
    assert not Message.objects.exists()
    dump = dump_all_tables()
    assert name not in dump and "for Lin 林" not in dump


def test_restore_is_refused_while_a_server_process_runs_and_changes_nothing(folder):
    profile = ProfileFactory(key="owner")
    _say(profile, 2)
    backup = backups.make_backup()
    _say(profile, 1, start=5)
    lock = server_lock.hold()
    try:
        with pytest.raises(backups.BackupError, match="server process is running"):
            backups.restore(backup.path)
    finally:
        lock.close()
    assert Message.objects.count() == 3


def test_a_corrupt_backup_file_is_refused_by_name_and_nothing_changes(folder):
    ProfileFactory(key="owner")
    folder.mkdir(parents=True, exist_ok=True)
    bad = folder / "previously-20261201T000000000000Z.sqlite3"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x13" * 5000)
    if connection.vendor != "sqlite":
        bad = bad.with_suffix(".pgdump")
        bad.write_bytes(b"PGDMP not really")
    with pytest.raises(CommandError, match=bad.name):
        call_command("restore", str(bad), "--noinput")
    assert Profile.objects.filter(key="owner").exists()


def test_the_commands_take_and_restore_a_backup(folder, capsys):
    profile = ProfileFactory(key="owner")
    _say(profile, 3)
    call_command("backup")
    made = backups.last_backup()
    assert made is not None and "integrity ok" in capsys.readouterr().out
    delete_message(profile=profile, mid=f"c_{0:016x}", hard=True, force=True)
    call_command("restore", str(made.path), "--noinput")
    said = capsys.readouterr()
    assert "re-applied: 1" in said.out
    assert "warning" not in said.err  # the journal begins before the first backup's start time
    assert Message.objects.count() == 2


def test_backups_older_than_the_kept_days_go_and_the_journal_with_them(folder, settings):
    settings.PREVIOUSLY_BACKUP_KEEP_DAYS = 7
    profile = ProfileFactory(key="owner")
    _say(profile, 3)
    old = backups.make_backup(now=timezone.now() - timedelta(days=8))
    delete_message(profile=profile, mid=f"c_{0:016x}", hard=True, force=True)
    now = timezone.now()
    new = backups.make_backup(now=now)
    removed = backups.prune(now=now)
    assert removed == [old.path] and not old.path.exists() and new.path.exists()
    assert list(forget_journal.entries()) == []  # older than every backup kept
    assert forget_journal.since() >= new.started_at - timedelta(seconds=1)


def test_the_delete_confirmation_says_until_when_a_backup_holds_the_line(folder, client, settings):
    settings.PREVIOUSLY_BACKUP_KEEP_DAYS = 7
    profile = ProfileFactory(key="owner")
    client.force_login(profile.user)
    _say(profile, 2)
    backup = backups.make_backup()
    until = timezone.localtime(backup.expires_at).strftime("%Y-%m-%d")
    response = client.post(f"/p/{profile.key}/messages/c_{0:016x}/delete/", {"next": f"/p/{profile.key}/messages/"}, follow=True)
    assert until in response.content.decode()


def test_the_housekeeping_pass_takes_a_backup_when_one_is_due(folder, settings):
    settings.PREVIOUSLY_BACKUP_HOURS = 24
    ProfileFactory(key="owner")
    first = take_scheduled_backup()
    assert first is not None
    assert take_scheduled_backup() is None  # not due again within the day


def test_staff_see_the_last_backup_and_its_size_on_the_about_page(folder, client, django_user_model):
    staff = django_user_model.objects.create_user(username="root", password="pw-root-123", is_staff=True)
    ProfileFactory(user=staff, key="owner")
    client.force_login(staff)
    assert "No backup has been taken yet" in client.get("/about/").content.decode()
    backups.make_backup()
    page = client.get("/about/").content.decode()
    assert "Last backup" in page and "Backups kept" in page


def test_the_about_page_shows_the_last_backups_size_issue28_o6(folder, client, django_user_model):
    staff = django_user_model.objects.create_user(username="root", password="pw-root-123", is_staff=True)
    ProfileFactory(user=staff, key="owner")
    client.force_login(staff)
    made = backups.make_backup()
    assert made.bytes > 0
    assert f"· {filesizeformat(made.bytes)}</dd>" in client.get("/about/").content.decode()


def _restore_asking(monkeypatch, path, answer: str) -> list[str]:
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answer)
    call_command("restore", str(path))
    return asked


def test_the_restore_command_asks_first_and_restores_on_yes_issue28_o6(folder, monkeypatch, capsys):
    profile = ProfileFactory(key="owner")
    _say(profile, 2)
    backup = backups.make_backup()
    _say(profile, 1, start=5)  # written after: the restore loses it, as the question says
    asked = _restore_asking(monkeypatch, backup.path, " YES\n")
    assert len(asked) == 1 and f"{backup.started_at:%Y-%m-%d %H:%M} UTC" in asked[0]
    assert "Everything written since is lost" in asked[0]
    assert "restored" in capsys.readouterr().out
    assert Message.objects.count() == 2


def test_the_restore_command_changes_nothing_on_another_answer_issue28_o6(folder, monkeypatch):
    profile = ProfileFactory(key="owner")
    _say(profile, 2)
    backup = backups.make_backup()
    _say(profile, 1, start=5)
    for answer in ("no", "", "y"):
        with pytest.raises(CommandError, match="restore cancelled; nothing was changed"):
            _restore_asking(monkeypatch, backup.path, answer)
    assert Message.objects.count() == 3


def _postgresql_without_client_tools(monkeypatch):
    monkeypatch.setattr(backups, "engine", lambda: "postgresql")
    monkeypatch.setattr(backups.shutil, "which", lambda name: None)
    return connection.settings_dict["NAME"]


def test_without_pg_dump_the_backup_says_what_to_install_or_run_issue28_o6(folder, monkeypatch):
    name = _postgresql_without_client_tools(monkeypatch)
    with pytest.raises(CommandError) as refused:
        call_command("backup")
    said = str(refused.value)
    assert "pg_dump is not installed here" in said and "postgresql-client" in said
    assert f"pg_dump --format=custom --dbname {name}" in said and "--file BACKUP.pgdump" in said
    assert not any(folder.glob("previously-*"))  # no partial copy left


def test_without_pg_restore_the_restore_says_what_to_run_issue28_o6(folder, monkeypatch):
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / "previously-20261201T000000000000Z.pgdump"
    dump.write_bytes(b"PGDMP")
    name = _postgresql_without_client_tools(monkeypatch)
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(dump), "--noinput")
    said = str(refused.value)
    assert "pg_restore is not installed here" in said
    assert f"pg_restore --clean --if-exists --no-owner --dbname {name}" in said and "BACKUP.pgdump" in said
    assert "--file" not in said  # pg_restore's --file is where it writes, not what it reads


def test_restore_takes_off_again_the_card_lines_a_conversation_delete_dropped(folder):
    """O6, D7: lines the person chose to drop with a deleted conversation cite it but quote
    none of its words, so re-applying the message deletes alone brought them back; the journal
    keeps each dropped line's key (section + hash, no text) and the restore drops it again."""
    profile = ProfileFactory(key="owner")
    slice_ = make_slice(profile, lines=[("user", "I finally told my sister about the new job 在里昂")])
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job 🚄", "Close to her sister")
    lyon = next(line.key for line in card_lines(parse(Card.objects.get(profile=profile).text)) if "Lyon" in line.text)
    backup = backups.make_backup()
    delete_slice(slice_, drop_lines=[lyon])
    assert lyon.encode() in forget_journal.journal_path().read_bytes()
    assert b"Moving to Lyon" not in forget_journal.journal_path().read_bytes()

    report = backups.restore(backup.path)

    facts = [f.text for f in parse(Card.objects.get(profile=profile).text).facts]
    assert not any("Lyon" in f for f in facts), facts
    assert report.reapplied.get(forget_journal.CARD_LINE) == 1
    assert not Message.objects.filter(slice__key=slice_.key).exists()


def _deleted_for_good_after_a_backup(profile, record):
    """A backup, then `record` hidden and purged as the data pages and `purge_soft_deleted` do
    (D1, D4): a delete for good, with its tombstones, made after the backup was taken."""
    backup = backups.make_backup()
    record.soft_delete()
    purge_soft_deleted(profile=profile)
    return backup


def test_restore_deletes_again_a_highlight_deleted_for_good_after_the_backup_issue28_o6(folder):
    """Issue 28 point 3, O6: the journal's `hl` entry alone brings a purged highlight's delete
    back after a restore (no line of it was deleted); its line stays (C1)."""
    profile = ProfileFactory(key="owner")
    _say(profile, 3)
    line = Message.objects.get(mid=f"c_{1:016x}")
    highlight = HighlightFactory(message=line)
    backup = _deleted_for_good_after_a_backup(profile, highlight)

    report = backups.restore(backup.path)

    assert report.reapplied == {"hl": 1}
    assert not Highlight.objects.filter(hid=highlight.hid).exists()
    assert Tombstone.objects.filter(kind="hl", object_id=highlight.hid).exists()  # blocks its re-import
    assert Message.objects.filter(mid=line.mid).exists()


def test_restore_deletes_again_an_experience_deleted_for_good_after_the_backup_issue28_o6(folder):
    """Issue 28 point 3, O6: a purged experience stays deleted through a restore (its `exp`
    entry), its history with it: none of its words is left in any table."""
    profile = ProfileFactory(key="owner")
    _say(profile, 2)
    experience = ExperienceFactory(profile=profile, title="面试前跑步 Morning run 🏃",
                                   content="Ran 5 km before the interview at the bridge office")
    ExperienceHistory.objects.create(experience=experience, actor="agent", action="updated",
                                     before={"content": experience.content}, after={"content": experience.content})
    backup = _deleted_for_good_after_a_backup(profile, experience)

    report = backups.restore(backup.path)

    assert report.reapplied == {"exp": 1}
    assert not Experience.objects.filter(eid=experience.eid).exists()
    assert Tombstone.objects.filter(kind="exp", object_id=experience.eid).exists()
    dump = dump_all_tables()
    assert "Ran 5 km before the interview" not in dump and "面试前跑步" not in dump
    assert Message.objects.filter(profile=profile).count() == 2


def test_restore_deletes_again_a_relation_deleted_for_good_after_the_backup_issue28_o6(folder):
    """Issue 28 point 3, O6: a purged relation stays deleted through a restore (its `rel`
    entry); the highlight and the experience it joined stay."""
    profile = ProfileFactory(key="owner")
    relation = RelationFactory(profile=profile)
    backup = _deleted_for_good_after_a_backup(profile, relation)

    report = backups.restore(backup.path)

    assert report.reapplied == {"rel": 1}
    assert not Relation.objects.filter(rid=relation.rid).exists()
    assert Tombstone.objects.filter(kind="rel", object_id=relation.rid).exists()
    assert Highlight.objects.filter(hid=relation.from_id).exists()
    assert Experience.objects.filter(eid=relation.to_id).exists()


def test_restore_deletes_again_a_line_whose_id_was_repaired_after_the_backup_by_its_raw_fragment_issue28_o6(
        folder, admin_client, admin_user):
    """Issue 28 point 3, O6 (D2, S5): a legacy line is backed up under an id stored before ids were
    full-matched; after the backup staff repair the id (`r_…`) and the person deletes the line
    for good. The journal's `msg` entry names the new id, which the backup does not know; its
    `mem` entry names the raw fragment, which the backup holds under the same key, still joined
    to the line: re-applying it deletes the fragment and the line (same content hash) again, so
    neither the raw copy nor the line comes back."""
    words = "我的新地址是里昂 Rue Mercière 7 🐱"
    profile = ProfileFactory(user=admin_user, key="owner")
    line = MessageFactory(profile=profile, mid="imp/ort\n", content=words, content_hash=content_hash("owner", words))
    LegacyFragment.objects.create(profile=profile, key="mem:owner:1760968800000_ab", role="user", content=words,
                                  ts=1760968800000, message=line, disposition="merged", fingerprint="x")
    backup = backups.make_backup()
    admin_client.post(reverse("admin:memory_message_changelist"),
                      {"action": "repair_message_ids", "_selected_action": [line.pk]})
    repaired = Message.objects.get(pk=line.pk).mid
    assert repaired.startswith("r_")
    delete_message(profile=profile, mid=repaired, hard=True, force=True)

    report = backups.restore(backup.path)

    assert report.reapplied == {"mem": 1}
    assert not LegacyFragment.objects.exists()
    assert not Message.objects.filter(profile=profile).exists()
    assert "Rue Mercière" not in dump_all_tables()
