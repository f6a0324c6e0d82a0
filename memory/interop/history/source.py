"""The file a person hands in (SPEC H1, S4): a plain JSON/JSONL file or a zip of them.

`Source.open(path, name=…)` checks a zip's directory before any member is read: no member
may have an absolute path or a `..` step, the members together may not expand past
PREVIOUSLY_MAX_IMPORT_BYTES, and there may be no more than PREVIOUSLY_IMPORT_MAX_MEMBERS of
them. A plain file may not be larger than PREVIOUSLY_MAX_IMPORT_BYTES either. Members are
read as streams (`open_member`); `zipfile` never hands out more than a member's declared size,
so the directory's sizes bound what is read.

`Refused` is every refusal of the import: it names the file, the record and the problem, and
is raised before anything is written (the plan reads the whole file first).
"""

import posixpath
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.utils.translation import gettext


class Refused(Exception):
    """A file the import will not take; `str()` names the file, the record and the problem."""

    def __init__(self, file: str, problem: str, record: str = ""):
        self.file, self.record, self.problem = file, record, problem
        where = record if record.startswith(file) else f"{file}, {record}" if record else file
        super().__init__(f"{where}: {problem}")


class Source:
    """A plain file or a zip, opened for several passes."""

    def __init__(self, path: Path, name: str):
        self.path = Path(path)
        self.name = name  # what the person called it (an upload's name), for refusals
        self.zip: zipfile.ZipFile | None = None
        self.members: list[str] = []
        self._infos: dict[str, zipfile.ZipInfo] = {}

    @classmethod
    def open(cls, path, *, name: str = "") -> "Source":
        source = cls(path, name or Path(path).name)
        source._check()
        return source

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()
            self.zip = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def refuse(self, problem: str, record: str = "") -> Refused:
        return Refused(self.name, problem, record)

    def _check(self) -> None:
        limit = settings.PREVIOUSLY_MAX_IMPORT_BYTES
        size = self.path.stat().st_size
        if size > limit:
            raise self.refuse(gettext("the file is %(size)s bytes; the limit is %(limit)s (PREVIOUSLY_MAX_IMPORT_BYTES).")
                              % {"size": f"{size:,}", "limit": f"{limit:,}"})
        if not zipfile.is_zipfile(self.path):
            self.members = [""]
            return
        try:
            self.zip = zipfile.ZipFile(self.path)
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise self.refuse(gettext("the zip archive is damaged (%(error)s).") % {"error": exc}) from None
        most = settings.PREVIOUSLY_IMPORT_MAX_MEMBERS
        if len(infos) > most:
            raise self.refuse(gettext("the zip archive holds %(count)s members; the limit is %(limit)s"
                                      " (PREVIOUSLY_IMPORT_MAX_MEMBERS).") % {"count": f"{len(infos):,}", "limit": f"{most:,}"})
        total = 0
        for info in infos:
            name = info.filename
            parts = name.replace("\\", "/").split("/")
            if name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"):
                raise self.refuse(gettext("a member has an unsafe path (absolute, or with '..'); nothing was imported."),
                                  record=repr(name[:120]))
            total += info.file_size
            if total > limit:
                raise self.refuse(gettext("the zip archive expands past %(limit)s bytes (PREVIOUSLY_MAX_IMPORT_BYTES).")
                                  % {"limit": f"{limit:,}"}, record=repr(name[:120]))
            if not info.is_dir():
                self._infos[name] = info
                self.members.append(name)

    @property
    def is_zip(self) -> bool:
        return self.zip is not None

    def label(self, member: str) -> str:
        """How a refusal names a member: the file, and the member inside a zip."""
        return f"{self.name}:{member}" if member else self.name

    @contextmanager
    def open_member(self, member: str) -> Iterator[BinaryIO]:
        if self.zip is None:
            with self.path.open("rb") as fh:
                yield fh
            return
        try:
            fh = self.zip.open(self._infos[member])
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
            raise self.refuse(gettext("a member cannot be read (%(error)s).") % {"error": exc}, record=member) from None
        with fh:
            yield _Checked(fh, self, member)

    def member_size(self, member: str) -> int:
        """The member's expanded size as the zip directory declares it (never exceeded on read)."""
        return self._infos[member].file_size if self.zip is not None else self.path.stat().st_size

    def read_member(self, member: str) -> bytes:
        with self.open_member(member) as fh:
            return fh.read()

    def basenames(self) -> dict[str, str]:
        """Each member's file name (its last path step) -> its full name."""
        return {posixpath.basename(m): m for m in self.members if m}


class _Checked:
    """A zip member as read: a damaged member (bad CRC, cut short) is a refusal naming it."""

    def __init__(self, fh, source: Source, member: str):
        self.fh, self.source, self.member = fh, source, member

    def _guard(self, call, *args):
        try:
            return call(*args)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as exc:
            raise self.source.refuse(gettext("a member is damaged (%(error)s).") % {"error": exc},
                                     record=self.member) from None

    def read(self, size: int = -1) -> bytes:
        return self._guard(self.fh.read, size)

    def readline(self, size: int = -1) -> bytes:
        return self._guard(self.fh.readline, size)

    def __iter__(self):
        while line := self.readline():
            yield line
