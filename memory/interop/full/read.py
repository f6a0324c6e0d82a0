"""The full import's reading (SPEC S4): the export's top level, then its profiles one at a time,
each checked (X4) before the caller counts or writes it.

An export is a JSON file, or (version 2, when it has images) a zip of `export.json` and the
image files (issue 28 point 4). A zip is opened by the history import's `Source`, the one home
of the zip checks: no member with an absolute path or a `..` step, no more than
PREVIOUSLY_IMPORT_MAX_MEMBERS members, nothing expanding past PREVIOUSLY_MAX_IMPORT_BYTES, and a
plain file no larger than that either."""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from memory.interop.export import FORMAT, JSON_MEMBER, VERSION, VERSIONS_READ
from memory.interop.full.check import check_profile
from memory.interop.full.report import BadExport
from memory.interop.history.source import Refused, Source
from memory.interop.json_stream import BadFile, ExportFile, Header


class Files:
    """The image files beside an export's JSON: a zip's members (none for a plain JSON)."""

    def __init__(self, source: Source | None = None):
        self.source = source

    def read(self, member, where: str) -> bytes:
        """The member's bytes, as the zip declares them; a refusal naming the record if the
        export does not hold it or it is damaged."""
        if self.source is None or not isinstance(member, str) or member not in self.source.members or not member:
            raise BadExport(f"{where}: the export holds no image file {member!r:.120} (an export with images is"
                            f" the zip the export made, holding {JSON_MEMBER} and its images). Nothing was written.")
        size, limit = self.source.member_size(member), settings.PREVIOUSLY_IMAGE_MAX_BYTES
        if size > limit:  # from the zip's directory: the member is never read
            raise BadExport(f"{where}: the image file {member!r:.120} is {size:,} bytes; the limit is {limit:,}"
                            " (PREVIOUSLY_IMAGE_MAX_BYTES). Nothing was written.")
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


def open_export_path(path, *, name: str = "") -> ExportArchive:
    """The export at `path`, a JSON file or a zip export, checked as the history import checks
    its files (size, members, paths); `name` is what a refusal calls it."""
    try:
        source = Source.open(path, name=name)
    except Refused as exc:
        raise BadExport(str(exc)) from None
    if not source.is_zip:
        return ExportArchive(json=ExportFile(lambda: source.path.open("rb")), source=source)
    if JSON_MEMBER not in source.members:
        source.close()
        raise BadExport(f"{source.name}: a zip export holds {JSON_MEMBER}; this zip does not. Nothing was written.")
    return ExportArchive(json=ExportFile(lambda: source.open_member(JSON_MEMBER)), files=Files(source),
                         source=source)


def open_export(data) -> tuple[Header, Callable[[], Iterable], Files]:
    """The export's top level, a way to walk its profiles (again for each pass), its files."""
    files = Files()
    if isinstance(data, ExportArchive):
        data, files = data.json, data.files
    if isinstance(data, ExportFile):
        try:
            return data.header(), data.profiles, files
        except BadFile as exc:
            raise BadExport(str(exc)) from None
    if not isinstance(data, dict):
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    profiles = data.get("profiles") or []
    count = len(profiles) if isinstance(profiles, list) else None
    return Header(members=data, profiles=count), lambda: profiles, files



def read_profiles(profiles: Callable[[], Iterable], header: Header) -> Iterator[tuple[int, dict]]:
    """(position, profile) of each profile of the export, checked (X4); a file that is not an
    export of this version, or stops being JSON, is refused (BadExport)."""
    members = header.members
    if members.get("format") != FORMAT:
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if members.get("version") not in VERSIONS_READ or isinstance(members.get("version"), bool):
        raise BadExport(f"export version {members.get('version')!r} is not supported (this app reads"
                        f" {', '.join(map(str, VERSIONS_READ))}; it writes {VERSION})")
    if header.profiles is None:
        raise BadExport("profiles must be a list")
    try:
        for position, pdata in enumerate(profiles()):
            check_profile(pdata, position)
            yield position, pdata
    except BadFile as exc:
        raise BadExport(str(exc)) from None
