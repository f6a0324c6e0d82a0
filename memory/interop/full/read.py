"""The full import's reading (SPEC S4, issue 24 point 6): the export's top level and, per
profile, its own members and how many records each list holds (one pass, building no record);
then the records of one kind at a time, for every profile in order, built one at a time as the
file streams — never a whole profile. Each profile's members are checked (X4) before the caller
counts or writes anything."""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice

from memory.interop.export import FORMAT, VERSION
from memory.interop.full.check import SCHEMA, check_members, check_record
from memory.interop.full.report import BadExport
from memory.interop.json_stream import BadFile, ExportFile, Header, ProfilePlan


@dataclass
class Export:
    """An export to import: its header (with a plan per profile), the records of a kind in
    file order (`records(kind)`, a new pass each time), and whether they were checked already."""

    header: Header
    records: Callable[[str], Iterable]
    checked: bool = False


def open_export(data) -> Export:
    """The export's top level, each profile's plan, and a way to walk a kind's records."""
    if isinstance(data, ExportFile):
        try:
            return Export(data.header(SCHEMA.keys()), data.records, checked=data.checked)
        except BadFile as exc:
            raise BadExport(str(exc)) from None
    if not isinstance(data, dict):
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        return Export(Header(members=data, profiles=None), lambda kind: ())
    plans = [_plan(p) for p in profiles]

    def records(kind: str) -> Iterator:
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
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if members.get("version") != VERSION:
        raise BadExport(f"export version {members.get('version')!r} is not supported (this app reads {VERSION})")
    if export.header.profiles is None:
        raise BadExport("profiles must be a list")
    return [(check_members(plan.members, position), plan) for position, plan in enumerate(export.header.plans)]


def kind_records(export: Export, plans: list[tuple[str, ProfilePlan]], kind: str, *,
                 check: bool) -> Iterator[Iterator[dict]]:
    """For each profile in order, an iterator of its records of `kind` (each checked first when
    `check`), all from one pass over the file; the caller uses each before asking for the next.
    A file whose records are not those the header pass counted is refused."""
    try:
        stream = iter(export.records(kind)) if any(plan.counts.get(kind) for _, plan in plans) else iter(())
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
