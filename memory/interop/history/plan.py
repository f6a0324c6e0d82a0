"""Read, check and count before anything is written (SPEC H1, S4; issue 27 points 3, 6, 9).

`HistoryImport` opens the file, detects the app, and reads it as a stream of conversations.
`preview()` is one pass that writes nothing: each conversation's lines and alternatives are
turned into planned rows (`planned`), every text is checked against the per-message limit,
and each row's mid is looked up among the archived ones and the tombstones. `apply()` runs
that same pass first (so a hostile file is refused before anything is written), then a second
pass that writes (memory.interop.history.write).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils.translation import gettext, gettext_lazy

from memory import limits
from memory.archive import slice_gap
from memory.clock import zone_named
from memory.interop.history import chatgpt, claude, openwebui, sillytavern
from memory.interop.history.detect import detect
from memory.interop.history.report import ConversationReport, Report
from memory.interop.history.shapes import MID_TAG, Conversation, InlineImage, Note, Skip, mid_for
from memory.interop.history.source import Refused, Source
from memory.models import Experience, Message, Profile, Tombstone
from memory.models.archive import DEFAULT_PROFILE_KEY

READERS = {"chatgpt": chatgpt.read, "claude": claude.read, "openwebui": openwebui.read,
           "sillytavern": sillytavern.read}
LOOKUP_CHUNK = 500
Progress = Callable[[str, int, int], None]  # (a Stage, done, total: 0 when not known)


class Stage:
    """What an import is doing, each stage on its own scale (so a bar never jumps between two):
    the check counts the conversations read (their number is known only at its end), the write
    counts the rows written of those the check found new."""

    CHECKING = "checking"
    WRITING = "writing"
    LABELS = {CHECKING: gettext_lazy("checking the file"), WRITING: gettext_lazy("writing the lines")}


def no_progress(stage: str, done: int, total: int) -> None:
    pass


@dataclass
class Row:
    """One message row a conversation asks for."""

    mid: str
    speaker: str
    text: str
    at: datetime
    alternative: bool = False
    reply_to: str = ""  # the mid of the user line this reply (or alternative) answers
    image: str | InlineImage = ""  # an image message's zip member, or the image the file held inline
    segment: int = 0  # which idle-gap segment of its conversation (S1)


@dataclass
class PlannedConversation:
    conversation: Conversation
    rows: list[Row]
    report: ConversationReport
    existing: dict[str, tuple[int, int]] = field(default_factory=dict)  # mid -> (pk, slice pk)
    tombstoned: set[str] = field(default_factory=set)

    def new_rows(self) -> list[Row]:
        return [r for r in self.rows if r.mid not in self.existing and r.mid not in self.tombstoned]


def note_eid(app: str, note: Note) -> str:
    """The stable id of the candidate experience a note becomes (re-import finds it)."""
    return "exp_" + mid_for(app, "notes", f"{note.kind}\x1f{note.text}")


class HistoryImport:
    """One file's import into one companion of `user`."""

    def __init__(self, path, *, user, name: str = "", profile_key: str | None = None, fmt: str = "auto"):
        self.source = Source.open(Path(path), name=name)
        try:
            self.detected = detect(self.source, fmt)
        except BaseException:
            self.source.close()
            raise
        self.app = self.detected.app
        self.user = user
        self.profile_key = profile_key or default_profile_key(user)
        self.profile = Profile.objects.filter(user=user, key=self.profile_key).first()
        tz_name = (self.profile.tz if self.profile else "") or settings.TIME_ZONE
        self.zone = zone_named(tz_name) or ZoneInfo("UTC")
        self.images = _image_index(self.source)
        self._lookup: tuple[dict[str, tuple[int, int]], set[str]] | None = None

    def close(self) -> None:
        self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def conversations(self) -> Iterator[Conversation]:
        return READERS[self.app](self.source, self.detected.members, self.zone)

    def planned(self) -> Iterator[PlannedConversation]:
        """Each conversation, checked and planned, with what is archived already looked up."""
        for conv in self.conversations():
            yield self._plan(conv)

    def preview(self, *, progress: Progress = no_progress) -> Report:
        report = self._report(dry_run=True)
        eids: set[str] = set()
        for n, planned in enumerate(self.planned(), 1):
            report.conversations.append(planned.report)
            for note in planned.conversation.notes:
                eids.add(note_eid(self.app, note))
            progress(Stage.CHECKING, n, 0)
        report.experiences_already = self._existing_eids(eids)
        report.experiences_new = len(eids) - report.experiences_already
        return report

    def _archived(self) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """What this companion holds already from this app (mid -> (pk, slice pk)) and the mids
        deleted for good: read once per pass, not per conversation (BENCH §5)."""
        if self._lookup is None:
            if self.profile is None:
                self._lookup = ({}, set())
            else:
                archived = {mid: (pk, slice_id) for mid, pk, slice_id in Message.objects.filter(
                    profile=self.profile, mid__startswith=MID_TAG[self.app] + "_"
                ).values_list("mid", "pk", "slice_id").iterator(chunk_size=LOOKUP_CHUNK * 10)}
                tombstones = set(Tombstone.objects.filter(profile=self.profile, kind=Tombstone.Kind.MESSAGE)
                                 .values_list("object_id", flat=True))
                self._lookup = (archived, tombstones)
        return self._lookup

    def forget_lookups(self) -> None:
        """Read the archive again at the next pass (the apply's, after the preview's)."""
        self._lookup = None

    def _report(self, *, dry_run: bool) -> Report:
        return Report(file=self.source.name, app=self.app, profile=self.profile_key,
                      profile_exists=self.profile is not None, dry_run=dry_run)

    def _existing_eids(self, eids: set[str]) -> int:
        if self.profile is None or not eids:
            return 0
        found = set(Experience.objects.filter(profile=self.profile, eid__in=eids).values_list("eid", flat=True))
        found |= set(Tombstone.objects.filter(profile=self.profile, kind=Tombstone.Kind.EXPERIENCE,
                                              object_id__in=eids).values_list("object_id", flat=True))
        return len(found)

    def _plan(self, conv: Conversation) -> PlannedConversation:
        rep = ConversationReport(key=conv.key, title=conv.title, record=conv.record, skipped=conv.skipped)
        rows = rows_of(conv, self.images, rep, record=self.source.name)
        for note in conv.notes:
            try:
                limits.FIELD.check(note.text)
            except limits.TextTooLong as exc:
                raise Refused(self.source.name, str(exc), conv.record) from None
        planned = PlannedConversation(conversation=conv, rows=rows, report=rep)
        archived, tombstones = self._archived()
        for r in rows:
            if r.mid in archived:
                planned.existing[r.mid] = archived[r.mid]
            elif r.mid in tombstones:
                planned.tombstoned.add(r.mid)
        _drop_orphans(planned)
        rep.already = sum(1 for r in planned.rows if r.mid in planned.existing)
        rep.tombstoned = sum(1 for r in planned.rows if r.mid in planned.tombstoned)
        rep.new = len(planned.rows) - rep.already - rep.tombstoned
        return planned


def default_profile_key(user) -> str:
    """Without --profile: the person's companion `owner` (as the pages pick it), else their first."""
    keys = list(Profile.objects.for_user(user).order_by("key").values_list("key", flat=True))
    return DEFAULT_PROFILE_KEY if not keys or DEFAULT_PROFILE_KEY in keys else keys[0]


def _image_index(source: Source) -> dict[str, str]:
    """File id -> zip member. ChatGPT names an image member by its file id and then "-name.ext"
    or ".ext" ("file-AbC123-photo.png", "file_00000000abcd-uuid.png"), so each member is
    indexed under every prefix that ends before a "-" or ".", and under its whole name."""
    index: dict[str, str] = {}
    for base, member in source.basenames().items():
        for i, ch in enumerate(base):
            if ch in "-." and i:
                index.setdefault(base[:i], member)
        index.setdefault(base, member)
    return index


def rows_of(conv: Conversation, images: dict[str, str], rep: ConversationReport, *, record: str) -> list[Row]:
    """The message rows a conversation asks for, in order, each checked (S6)."""
    rows: list[Row] = []
    previous = None  # the previous visible row
    segment, last_at = 0, None
    gap = slice_gap()
    for line in conv.lines:
        where = f"{conv.record}, {line.key!r:.80}"
        _check(line.text, file=record, record=where)
        found = [i if isinstance(i, InlineImage) else images[i] for i in line.images
                 if isinstance(i, InlineImage) or i in images]
        rep.images_found += len(found)
        rep.images_missing += len(line.images) - len(found)
        if not line.text and not found:
            conv.skipped[Skip.EMPTY] += 1
            continue
        if last_at is not None and line.at - last_at > gap:
            segment += 1
        last_at = line.at
        mid = conv.mid(line.key)
        reply_to = previous.mid if (line.speaker == "assistant" and previous is not None
                                    and previous.speaker == "user" and not previous.alternative) else ""
        first = Row(mid=mid, speaker=line.speaker, text=line.text, at=line.at, reply_to=reply_to,
                    image=found[0] if found else "", segment=segment)
        rows.append(first)
        for i, member in enumerate(found[1:], 1):
            rows.append(Row(mid=conv.mid(f"{line.key}\x1fimage{i}"), speaker=line.speaker, text="", at=line.at,
                            image=member, segment=segment))
        rep.lines += 1
        if rep.first is None or line.at < rep.first:
            rep.first = line.at
        if rep.last is None or line.at > rep.last:
            rep.last = line.at
        for alt in line.alternatives:
            _check(alt.text, file=record, record=f"{conv.record}, {alt.key!r:.80}")
            if not reply_to:
                conv.skipped[Skip.BRANCH] += 1
                continue
            rows.append(Row(mid=conv.mid(alt.key), speaker="assistant", text=alt.text, at=alt.at, alternative=True,
                            reply_to=reply_to, segment=segment))
            rep.alternatives += 1
        previous = first
    return rows


def _drop_orphans(planned: PlannedConversation) -> None:
    """New alternatives of a reply (or of a user line) deleted for good stay out with it (D2)."""
    gone = planned.tombstoned
    if not gone:
        return
    answered = {r.reply_to: r.mid for r in planned.rows if r.reply_to and not r.alternative}
    for r in planned.rows:
        if r.alternative and r.mid not in planned.existing and (r.reply_to in gone or answered.get(r.reply_to) in gone):
            gone.add(r.mid)


def _check(text: str, *, file: str, record: str) -> None:
    """A text the archive can store: within the per-message limit (S6), and valid Unicode."""
    try:
        limits.MESSAGE.check(text)
    except limits.TextTooLong as exc:
        raise Refused(file, str(exc), record) from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(file, gettext("a text holds a lone surrogate, which cannot be stored."), record) from None
