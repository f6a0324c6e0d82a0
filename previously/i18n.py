"""Compile gettext catalogues in pure Python (no gettext binaries needed at install time).

The logic of CPython's Tools/i18n/msgfmt.py, reduced to what our .po files use: plain and
plural entries, msgctxt, continuation lines; fuzzy entries are skipped, as msgfmt does.
`manage.py compile_translations` writes every locale/*/LC_MESSAGES/django.mo; the compiled
files are committed too, and a test keeps them in step with the .po sources.
"""

import ast
import struct
from pathlib import Path


def parse_po(text: str) -> dict[str, str]:
    """{msgid (with "ctxt\\x04" prefix, plurals joined by NUL): msgstr} of the non-fuzzy entries."""
    catalog: dict[str, str] = {}
    fuzzy = False
    ctxt = msgid = plural = None
    strs: dict[int, str] = {}
    field: tuple[str, int] | None = None

    def flush():
        nonlocal ctxt, msgid, plural, strs, fuzzy
        if msgid is not None and not fuzzy and (strs.get(0) or msgid == ""):
            key = msgid if plural is None else msgid + "\0" + plural
            if ctxt is not None:
                key = ctxt + "\x04" + key
            catalog[key] = "\0".join(strs[i] for i in sorted(strs))
        ctxt = msgid = plural = None
        strs, fuzzy = {}, False

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            if msgid is not None and field and field[0] == "msgstr":
                flush()
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            continue
        if not line:
            continue
        keyword, _, rest = line.partition(" ")
        if keyword == "msgctxt":
            flush()
            ctxt, field = "", ("ctxt", 0)
        elif keyword == "msgid":
            if field and field[0] == "msgstr":
                keep = fuzzy
                flush()
                fuzzy = keep
            msgid, field = "", ("id", 0)
        elif keyword == "msgid_plural":
            plural, field = "", ("plural", 0)
        elif keyword.startswith("msgstr"):
            index = int(keyword[7:-1]) if "[" in keyword else 0
            strs[index], field = "", ("msgstr", index)
        else:
            rest = line  # a continuation line
        value = ast.literal_eval(rest)
        if field is None:
            continue
        if field[0] == "ctxt":
            ctxt += value
        elif field[0] == "id":
            msgid += value
        elif field[0] == "plural":
            plural += value
        else:
            strs[field[1]] += value
    flush()
    return catalog


def mo_bytes(catalog: dict[str, str]) -> bytes:
    """The GNU .mo encoding of a catalogue (little-endian, no hash table)."""
    keys = sorted(catalog)
    ids = b"".join(k.encode() + b"\0" for k in keys)
    strs = b"".join(catalog[k].encode() + b"\0" for k in keys)
    n = len(keys)
    start_ids = 7 * 4 + n * 16
    start_strs = start_ids + len(ids)
    offsets_ids, offsets_strs, pos_i, pos_s = [], [], 0, 0
    for k in keys:
        ki, vs = k.encode(), catalog[k].encode()
        offsets_ids += [len(ki), start_ids + pos_i]
        offsets_strs += [len(vs), start_strs + pos_s]
        pos_i += len(ki) + 1
        pos_s += len(vs) + 1
    header = struct.pack("<Iiiiiii", 0x950412DE, 0, n, 7 * 4, 7 * 4 + n * 8, 0, 0)
    return header + struct.pack(f"<{2 * n}i", *offsets_ids) + struct.pack(f"<{2 * n}i", *offsets_strs) + ids + strs


def compile_all(locale_dir: Path) -> list[Path]:
    """Write django.mo beside every django.po under `locale_dir`; returns the files written."""
    written = []
    for po in sorted(locale_dir.glob("*/LC_MESSAGES/django.po")):
        mo = po.with_suffix(".mo")
        mo.write_bytes(mo_bytes(parse_po(po.read_text(encoding="utf-8"))))
        written.append(mo)
    return written
