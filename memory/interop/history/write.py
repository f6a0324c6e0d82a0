"""Apply an import in short batches (SPEC H1, S1, S4; issue 27 points 2, 3, 6).

`apply(history_import)` first runs the whole preview (every record checked, nothing written:
a refused file leaves no trace), then reads the file again and writes each conversation's new
rows in batches of PREVIOUSLY_HISTORY_BATCH_ROWS, each in its own short transaction, so another
writer gets the lock between two; when one begins to wait during a batch, the batch commits
after its part in hand (`write_in_steps`) and gives way. In each part the rows go in as plain
rows (bulk_insert, as the legacy importer does) with keys reserved up front, replies are tied to
the user line they answer (`reply_of`, U2) and the visible lines enter the recall index in the
same transaction (D3). Sentence vectors are left to `manage.py embed_backfill`, as for the
legacy import: making 150k of them would take the import far past its budget (BENCH §5).

Slices (S1): each source conversation is split by the idle gap into segments; each segment is
its own slice (closed, reason `import`), never one of live chat's or another conversation's.
A segment some of whose lines are archived already (an import interrupted, or the same file
with new messages) reuses their slice. Image members are re-encoded and stored (A7) before
their batch's transaction; a member that is not an image we take is counted as missing, and by
its kind (too large, or not an image). An image the file held inline (an Open WebUI data: URL,
`InlineImage`) takes the same path from its decoded bytes; a batch is written early once its
inline images hold PREVIOUSLY_IMAGE_MAX_BYTES × INLINE_BATCH_IMAGES bytes, so memory stays
bounded however many pictures a conversation had.

Idempotent: rows whose mid is archived or tombstoned are not written; running the same import
again writes nothing, and finishes an interrupted one.
"""

import gc
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext

from memory.archive import free_slice_key
from memory.clock import local_clock
from memory.curation import propose_imported_experience
from memory.hashing import content_hash
from memory.images import ImageRefused, check_image, remove_files, save_image_files
from memory.interop.bulk_insert import insert_rows, leave_the_lock, reserve_pks, write_in_steps
from memory.interop.history.detect import APP_NAMES
from memory.interop.history.plan import (
    HistoryImport,
    PlannedConversation,
    Progress,
    Row,
    Stage,
    no_progress,
    note_eid,
)
from memory.interop.history.report import Report
from memory.interop.history.shapes import InlineImage, Skip
from memory.interop.legacy.rows import MessageRow
from memory.models import Message, Profile, Slice
from memory.recall.index import Analysis, analysis, index_messages, optimize_index
from memory.recall.tokenize import tokenize

GC_THRESHOLD = 100_000  # allocations between two young-generation collections while importing
INLINE_BATCH_IMAGES = 4  # a batch's inline images hold at most about this many images' worth of bytes


def apply(imp: HistoryImport, *, progress: Progress = no_progress) -> Report:
    """Preview (refusing a bad file before any write), then write in batches. The collector
    runs less often meanwhile: an import builds millions of short-lived, acyclic objects, and
    with the default thresholds the collections took a quarter of its CPU (BENCH §5)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_THRESHOLD), *thresholds[1:])
    try:
        return _apply(imp, progress=progress)
    finally:
        gc.set_threshold(*thresholds)


def _apply(imp: HistoryImport, *, progress: Progress) -> Report:
    preview = imp.preview(progress=progress)  # refuses a bad file before anything is written
    report = imp._report(dry_run=False)
    # The write pass's own reports: it finds the images a preview only counts (one that is no
    # image we take turns from found to missing).
    report.conversations = []
    report.experiences_already = preview.experiences_already
    profile = imp.profile or Profile.objects.get_or_create(user=imp.user, key=imp.profile_key)[0]
    imp.profile = profile
    imp.forget_lookups()
    writer = _Writer(profile, imp, report, progress, expected=preview.total().new)
    progress(Stage.WRITING, 0, writer.expected)
    eids: set[str] = set()
    for planned in imp.planned():
        report.conversations.append(planned.report)
        writer.add(planned)
        for note in planned.conversation.notes:
            eid = note_eid(imp.app, note)
            if eid not in eids:
                eids.add(eid)
                report.experiences_new += _experience(profile, imp, note, eid)
    writer.flush()
    if report.written:
        optimize_index(between=leave_the_lock)
    return report


def _experience(profile: Profile, imp: HistoryImport, note, eid: str) -> int:
    app = APP_NAMES[imp.app]
    with translation.override(profile.language):
        title = (gettext("What %(app)s remembered") if note.kind == Skip.APP_MEMORY
                 else gettext("Custom instructions in %(app)s")) % {"app": app}
        reason = gettext("imported from %(file)s") % {"file": imp.source.name}
    origin = {"app": imp.app, "kind": note.kind, "file": imp.source.name[:200]}
    made = propose_imported_experience(profile=profile, eid=eid, title=title, content=note.text, origin=origin,
                                       reason=reason)
    return 1 if made else 0


@dataclass
class _Segment:
    slice_id: int | None
    start: datetime
    end: datetime
    pending: Slice | None = None


class _Writer:
    def __init__(self, profile: Profile, imp: HistoryImport, report: Report, progress: Progress, *, expected: int):
        self.profile, self.imp, self.report, self.progress = profile, imp, report, progress
        self.expected = expected
        self.batch_rows = settings.PREVIOUSLY_HISTORY_BATCH_ROWS
        self.tz_name = profile.tz or settings.TIME_ZONE
        self.keys = set(Slice.objects.filter(profile=profile).values_list("key", flat=True))
        self.rows: list[tuple[Row, _Segment, PlannedConversation]] = []
        self.inline_bytes = 0  # what the batch's inline images hold
        self.pks: dict[str, int] = {}  # mid -> pk of the rows replies may point at

    def add(self, planned: PlannedConversation) -> None:
        new = planned.new_rows()
        if not new:
            return
        segments: dict[int, _Segment] = {}
        for row in planned.rows:
            seg = segments.get(row.segment)
            if seg is None:
                seg = segments[row.segment] = _Segment(slice_id=None, start=row.at, end=row.at)
            seg.start, seg.end = min(seg.start, row.at), max(seg.end, row.at)
            found = planned.existing.get(row.mid)
            if found:
                seg.slice_id = seg.slice_id or found[1]
                self.pks[row.mid] = found[0]
        inline_most = settings.PREVIOUSLY_IMAGE_MAX_BYTES * INLINE_BATCH_IMAGES
        for row in new:
            self.rows.append((row, segments[row.segment], planned))
            if isinstance(row.image, InlineImage):
                self.inline_bytes += len(row.image.data)
            if len(self.rows) >= self.batch_rows or self.inline_bytes >= inline_most:
                self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        batch, self.rows, self.inline_bytes = self.rows, [], 0
        attachments, written = self._images(batch)
        # The rows and their recall entries are made before the transaction: SQLite's write
        # lock is held for the writes alone, and another person's writes wait for one part of
        # them at most (write_in_steps; S4, BENCH §5).
        rows = self._rows(batch, attachments)
        analysed = {r.mid: analysis(self.profile.pk, tokenize(r.content)) for r, _seg in rows if r.deleted_at is None}
        reply_to = {row.mid: row.reply_to for row, _seg, _p in batch if row.reply_to}
        committed: set[str] = set()

        def write(part):
            self._write(part, analysed, reply_to)
            transaction.on_commit(lambda: committed.update(r.mid for r, _seg in part))

        try:
            write_in_steps(rows, write)
        except BaseException:
            remove_files([path for mid, paths in written.items() if mid not in committed for path in paths])
            raise
        self.progress(Stage.WRITING, min(self.report.written, self.expected), self.expected)

    def _images(self, batch) -> tuple[dict[str, dict], dict[str, list[str]]]:
        """Image rows' files (a zip member, or an image the file held inline), checked and
        re-encoded (check_image) and stored before the transaction (A7, S4): their attachments
        and the paths written, by mid."""
        attachments, written = {}, {}
        for row, _seg, planned in batch:
            if not row.image:
                continue
            try:
                data, name = self._image_bytes(row.image)
                checked = check_image(data, name=name)
            except ImageRefused as exc:
                planned.report.images_found -= 1
                planned.report.images_missing += 1
                planned.report.skipped[Skip.IMAGE_TOO_LARGE if exc.status == 413 else Skip.IMAGE_REFUSED] += 1
                continue
            attachment, paths = save_image_files(profile_id=self.profile.pk, mid=row.mid, checked=checked)
            attachments[row.mid] = attachment
            written[row.mid] = paths
        return attachments, written

    def _image_bytes(self, image: str | InlineImage) -> tuple[bytes, str]:
        """(the image's bytes, its name); a member over PREVIOUSLY_IMAGE_MAX_BYTES is never read."""
        if isinstance(image, InlineImage):
            return image.data, image.name
        limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
        if self.imp.source.member_size(image) > limit:
            raise ImageRefused("too large", status=413)
        return self.imp.source.read_member(image), image

    def _rows(self, batch, attachments: dict[str, dict]) -> list[tuple[MessageRow, _Segment]]:
        """The batch's memory_message rows, with their segment (whose slice may not exist yet)."""
        now = timezone.now()
        rows = []
        for row, seg, _planned in batch:
            attachment = attachments.get(row.mid)
            if row.image and attachment is None and not row.text:
                continue  # an image we could not take, with no words beside it
            clock = local_clock(row.at, self.tz_name)
            rows.append((MessageRow(
                mid=row.mid, speaker=row.speaker, content=row.text, created_at=row.at, legacy_key="",
                content_hash=content_hash(self.profile.key, row.text), legacy_extra={},
                message_type=Message.Type.IMAGE if attachment else Message.Type.TEXT,
                local_day_key=clock.day_key, local_hour=clock.hour, period=clock.period, tz=clock.tz_name,
                source_id=self.imp.app, deleted_at=now if row.alternative else None, attachment=attachment,
                profile_id=self.profile.pk,
            ), seg))
        return rows

    def _write(self, made: list[tuple[MessageRow, _Segment]], analysed: dict[str, Analysis],
               reply_to: dict[str, str]) -> None:
        """One part of a batch: its rows (with their slices) and their recall entries."""
        self._open_slices([seg for _r, seg in made])
        for r, seg in made:
            r.slice_id = seg.slice_id
        rows = [r for r, _seg in made]
        # Keys reserved up front: a reply points at its line in the same INSERT, with no read-back
        # of the keys and no UPDATE after it (a shorter hold of the write lock, S4, BENCH §5).
        for r, pk in zip(rows, reserve_pks(Message, len(rows)), strict=True):
            r.pk = self.pks[r.mid] = pk
        for r in rows:
            r.reply_of_id = self.pks.get(reply_to.get(r.mid))
        insert_rows(Message, rows, with_pk=True)
        pks = {r.mid: r.pk for r in rows}
        index_messages([r for r in rows if r.deleted_at is None], new=True,
                       analysed={pks[mid]: entry for mid, entry in analysed.items() if mid in pks})
        self.report.written += len(rows)

    def _open_slices(self, segments: list[_Segment]) -> None:
        """A slice for each segment that has none yet (its span is the whole segment's), and a
        reused slice widened to its segment when an earlier run wrote part of it."""
        fresh, widen = [], {}
        for seg in segments:
            if seg.slice_id is None and seg.pending is None:
                local = local_clock(seg.start, self.tz_name).local
                key = free_slice_key(local, self.keys)
                self.keys.add(key)
                seg.pending = Slice(profile=self.profile, key=key, started_at=seg.start, last_message_at=seg.end,
                                    ended_at=seg.end, close_reason=Slice.CloseReason.IMPORT,
                                    tz=local_clock(seg.start, self.tz_name).tz_name)
                fresh.append(seg)
            elif seg.slice_id is not None:
                widen[seg.slice_id] = seg
        if fresh:
            Slice.objects.bulk_create([s.pending for s in fresh])
            for seg in fresh:
                seg.slice_id = seg.pending.pk
            self.report.slices += len(fresh)
        for slice_id, seg in widen.items():
            Slice.objects.filter(pk=slice_id, started_at__gt=seg.start).update(started_at=seg.start)
            Slice.objects.filter(pk=slice_id, last_message_at__lt=seg.end).update(last_message_at=seg.end,
                                                                                 ended_at=seg.end)
