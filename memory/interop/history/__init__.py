"""Bring your history (SPEC H1, issue 27): other apps' chat exports as archived conversations.

The interface, for the command, the data page and whoever builds on it:

    from memory.interop.history import HistoryImport, Refused, apply

    with HistoryImport(path, user=user, name="export.zip", profile_key="mia", fmt="auto") as imp:
        report = imp.preview()          # writes nothing; refuses a bad file (Refused)
        report = apply(imp, progress=…) # preview again, then write in short batches

Modules: `source` (the file or zip, safely), `detect` (which app, by content), one reader per
app (`chatgpt`, `claude`, `openwebui`, `sillytavern`: each `read(source, members, zone)` yields
`shapes.Conversation`s as it streams), `plan` (check and count: the preview), `write` (the
batched apply), `report` (what was found and done, also as JSON).
"""

from memory.interop.history.plan import HistoryImport
from memory.interop.history.report import Report
from memory.interop.history.source import Refused
from memory.interop.history.write import apply

__all__ = ["HistoryImport", "Refused", "Report", "apply"]
