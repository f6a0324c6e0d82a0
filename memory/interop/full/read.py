"""The full import's reading (SPEC S4, issue 24 point 6): the export's top level and, per
profile, its own members and how many records each list holds (one pass, building no record);
then the records of one kind at a time, for every profile in order, built one at a time as the
file streams — never a whole profile. Each profile's members are checked (X4) before the caller
counts or writes anything.

An export is a JSON file, or (version 2, when it has images) a zip of `export.json` and the
image files (issue 28 point 4). A zip is opened by the history import's `Source`, the one home
of the zip checks: no member with an absolute path or a `..` step, no more than
PREVIOUSLY_IMPORT_MAX_MEMBERS members, nothing expanding past PREVIOUSLY_MAX_IMPORT_BYTES, and a
plain file no larger than that either."""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice

from django.conf import settings
from django.utils.translation import gettext

from memory.interop.export import FORMAT, JSON_MEMBER, VERSION, VERSIONS_READ
from memory.interop.full.check import SCHEMA, check_members, check_record
from memory.interop.full.report import BadExport
from memory.interop.history.source import Refused, Source
from memory.interop.json_stream import BadFile, ExportFile, Header, ProfilePlan


class Files:
    """The image files beside an export's JSON: a zip's members (none for a plain JSON)."""

    def __init__(self, source: Source | None = None):
        self.source = source

    def read(self, member, where: str) -> bytes:
        """The member's bytes, as the zip declares them; a refusal naming the record if the
        export does not hold it or it is damaged."""
        if self.source is None or not isinstance(member, str) or member not in self.source.members or not member:
            raise BadExport(gettext("%(record)s: the export holds no image file %(file)s (an export with images is"
                                    " the zip the export made, holding %(member)s and its images). Nothing was"
                                    " written.") % {"record": where, "file": f"{member!r:.120}", "member": JSON_MEMBER})
        size, limit = self.source.member_size(member), settings.PREVIOUSLY_IMAGE_MAX_BYTES
        if size > limit:  # from the zip's directory: the member is never read
            raise BadExport(gettext("%(record)s: the image file %(file)s is %(size)s bytes; the limit is %(limit)s"
                                    " (PREVIOUSLY_IMAGE_MAX_BYTES). Nothing was written.") % {
                "record": where, "file": f"{member!r:.120}", "size": f"{size:,}", "limit": f"{limit:,}"})
        try:
            return self.source.read_member(member)
        except Refused as exc:
            raise BadExport(str(exc)) from None


@dataclass
class ExportArchive:
    """An export file as opened from a path: its JSON, read as it streams, and its files."""

    json: ExportFile
    files: Files = field(default_factory=Files)
    source: Source | None = None

    def close(self) -> None:
        if self.source is not None:
            self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_export_path(path, *, name: str = "", checked: bool = False) -> ExportArchive:
    """The export at `path`, a JSON file or a zip export, checked as the history import checks
    its files (size, members, paths); `name` is what a refusal calls it; `checked`: its records
    were checked already (the data page's preview of this same stored file, issue 24 point 6)."""
    try:
        source = Source.open(path, name=name)
    except Refused as exc:
        raise BadExport(str(exc)) from None
    if not source.is_zip:
        return ExportArchive(json=ExportFile(lambda: source.path.open("rb"), checked=checked), source=source)
    if JSON_MEMBER not in source.members:
        source.close()
        raise BadExport(gettext("%(file)s: a zip export holds %(member)s; this zip does not. Nothing was written.") % {
            "file": source.name, "member": JSON_MEMBER})
    return ExportArchive(json=ExportFile(lambda: source.open_member(JSON_MEMBER), checked=checked), files=Files(source),
                         source=source)


@dataclass
class Export:
    """An export to import: its header (with a plan per profile), the records of a kind in
    file order (`records(kind)`, a new pass each time), whether they were checked already, and
    the image files beside its JSON."""

    header: Header
    records: Callable[..., Iterable]  # (kind, how many the header counted)
    checked: bool = False
    files: Files = field(default_factory=Files)


def open_export(data) -> Export:
    """The export's top level, each profile's plan, a way to walk a kind's records, its files."""
    files = Files()
    if isinstance(data, ExportArchive):
        data, files = data.json, data.files
    if isinstance(data, ExportFile):
        try:
            return Export(data.header(SCHEMA.keys()), data.records, checked=data.checked, files=files)
        except BadFile as exc:
            raise BadExport(str(exc)) from None
    if not isinstance(data, dict):
        raise BadExport(gettext("not a Previously export (expected format %(format)s)") % {"format": repr(FORMAT)})
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        return Export(Header(members=data, profiles=None), lambda kind, count=None: ())
    plans = [_plan(p) for p in profiles]

    def records(kind: str, count: int | None = None) -> Iterator:
        return chain.from_iterable(p.get(kind) for p, plan in zip(profiles, plans, strict=True) if plan.counts.get(kind))
    return Export(Header(members=data, profiles=len(profiles), plans=plans), records)


def _plan(pdata) -> ProfilePlan:
    if not isinstance(pdata, dict):
        return ProfilePlan()
    lists = {k: v for k, v in pdata.items() if k in SCHEMA and isinstance(v, list)}
    return ProfilePlan(members={k: v for k, v in pdata.items() if k not in lists},
                       counts={k: len(v) for k, v in lists.items()})


def read_plans(export: Export) -> list[tuple[str, ProfilePlan]]:
    """(key, plan) of each profile of the export, its members checked (X4); a file that is not
    an export of this version is refused (BadExport)."""
    members = export.header.members
    if members.get("format") != FORMAT:
        raise BadExport(gettext("not a Previously export (expected format %(format)s)") % {"format": repr(FORMAT)})
    if members.get("version") not in VERSIONS_READ or isinstance(members.get("version"), bool):
        raise BadExport(gettext("export version %(version)s is not supported (this app reads %(read)s; it writes"
                                " %(writes)s)") % {"version": repr(members.get("version")),
                                                   "read": ", ".join(map(str, VERSIONS_READ)), "writes": VERSION})
    if export.header.profiles is None:
        raise BadExport(gettext("profiles must be a list"))
    return [(check_members(plan.members, position), plan) for position, plan in enumerate(export.header.plans)]


def kind_records(export: Export, plans: list[tuple[str, ProfilePlan]], kind: str, *,
                 check: bool) -> Iterator[Iterator[dict]]:
    """For each profile in order, an iterator of its records of `kind` (each checked first when
    `check`), all from one pass over the file; the caller uses each before asking for the next.
    A file whose records are not those the header pass counted is refused."""
    try:
        total = sum(plan.counts.get(kind, 0) for _, plan in plans)
        stream = iter(export.records(kind, total)) if total else iter(())
        for key, plan in plans:
            records = islice(stream, plan.counts.get(kind, 0))
            yield _checked(kind, key, records) if check else records
            for _ in records:  # what the caller left (none: each step reads all its records)
                pass
        if next(stream, None) is not None:
            raise BadFile(f"That file has more {kind} than its first reading counted; it changed while being read.")
    except BadFile as exc:
        raise BadExport(str(exc)) from None


def _checked(kind: str, key: str, records: Iterable) -> Iterator[dict]:
    for n, rec in enumerate(records):
        check_record(kind, n, rec, key)
        yield rec
