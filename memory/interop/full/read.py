"""The full import's reading (SPEC S4): the export's top level, then its profiles one at a time,
each checked (X4) before the caller counts or writes it."""

from collections.abc import Callable, Iterable, Iterator

from memory.interop.export import FORMAT, VERSION
from memory.interop.full.check import check_profile
from memory.interop.full.report import BadExport
from memory.interop.json_stream import BadFile, ExportFile, Header


def open_export(data) -> tuple[Header, Callable[[], Iterable]]:
    """The export's top level and a way to walk its profiles (again for each pass)."""
    if isinstance(data, ExportFile):
        try:
            return data.header(), data.profiles
        except BadFile as exc:
            raise BadExport(str(exc)) from None
    if not isinstance(data, dict):
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    profiles = data.get("profiles") or []
    count = len(profiles) if isinstance(profiles, list) else None
    return Header(members=data, profiles=count), lambda: profiles



def read_profiles(profiles: Callable[[], Iterable], header: Header) -> Iterator[tuple[int, dict]]:
    """(position, profile) of each profile of the export, checked (X4); a file that is not an
    export of this version, or stops being JSON, is refused (BadExport)."""
    members = header.members
    if members.get("format") != FORMAT:
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if members.get("version") != VERSION:
        raise BadExport(f"export version {members.get('version')!r} is not supported (this app reads {VERSION})")
    if header.profiles is None:
        raise BadExport("profiles must be a list")
    try:
        for position, pdata in enumerate(profiles()):
            check_profile(pdata, position)
            yield position, pdata
    except BadFile as exc:
        raise BadExport(str(exc)) from None
