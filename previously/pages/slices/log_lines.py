"""The slice page's technical log in the interface language (issue 25 point 7, U-series).

The log entries and card update runs are stored in English (the agent reads them back with
its `read_slice_log` tool, K11); the page builds each line again from the entry's structured
`data` in the active language. What a model wrote (a reason, a summary, a tool's answer) is
shown as it wrote it; an entry of a kind this module does not know keeps its stored text.
"""

from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from memory.models import EvolutionRun, Slice, SliceLogEntry
from memory.phrases import shown

# Fixed English texts the agent stores (skip reasons, run errors, tool verdicts), as the page
# shows them.
KNOWN = {
    "no model configured": gettext_lazy("no model configured"),
    "nothing worth keeping": gettext_lazy("nothing worth keeping"),
    "analyzer failed — ran anyway": gettext_lazy("analyzer failed — ran anyway"),
    "interrupted before it finished — the card is unchanged": gettext_lazy(
        "interrupted before it finished — the card is unchanged"),
    "the agent ended without a summary": gettext_lazy("the agent ended without a summary"),
    "the slice has no user messages": gettext_lazy("the slice has no user messages"),
    "the person edited the card": gettext_lazy("the person edited the card"),
    "card lines removed with a deleted message": gettext_lazy("card lines removed with a deleted message"),
}
REQUEST_KINDS = {
    "memory_request": gettext_lazy("a request to remember"),
    "correction": gettext_lazy("a correction"),
}
SOURCES = {"rules": pgettext_lazy("found by", "rules"), "model": pgettext_lazy("found by", "model")}


def known(text: str) -> str:
    """A fixed English text of the agent's in the interface language; anything else as it is."""
    return str(KNOWN.get(text, text))


def tool_answer(step: dict) -> str:
    """A run step's tool answer in the interface language when it was made translatable
    (memory.phrases: the reasons a call was refused), else as it is stored."""
    return shown(step.get("said"), step.get("result", ""))


def log_line(entry: SliceLogEntry) -> str:
    """One cognitive-log entry as the page shows it."""
    d = entry.data or {}
    event = d.get("event")
    if entry.kind == SliceLogEntry.Kind.ANALYZER:
        return _analyzer(entry, d, event)
    if entry.kind == SliceLogEntry.Kind.EVOLUTION:
        return _evolution(entry, d, event)
    if event == "closed":
        reason = dict(Slice.CloseReason.choices).get(d.get("reason"), d.get("reason", ""))
        return gettext("slice closed (%(reason)s)") % {"reason": reason}
    if event == "cache_break":
        return gettext("Injected card re-rendered: %(reason)s") % {"reason": known(d.get("reason", ""))}
    return entry.summary


def _analyzer(entry: SliceLogEntry, d: dict, event) -> str:
    if event == "memory_update":
        kind = REQUEST_KINDS.get(d.get("request_kind"), d.get("request_kind", ""))
        source = SOURCES.get(d.get("source"), d.get("source", ""))
        return gettext("Explicit request: %(kind)s (found by %(source)s)") % {"kind": kind, "source": source}
    if event == "analyzer_failed":
        return gettext("The turn analyzer's model failed (%(error)s); by the rules, no request.") % {
            "error": d.get("error", "")}
    if event == "turn":
        reason = d.get("reason")
        if reason:
            return gettext("No explicit request (model): %(reason)s") % {"reason": reason}
        return gettext("No explicit request (model).")
    if event == "worth":
        reason = known(d.get("reason", ""))
        if d.get("failed"):
            return gettext("The analyzer failed; the card update ran anyway.")
        if d.get("worth"):
            return gettext("Worth a card update: %(reason)s") % {"reason": reason}
        return gettext("Not worth a card update: %(reason)s") % {"reason": reason}
    return entry.summary


def _evolution(entry: SliceLogEntry, d: dict, event) -> str:
    run = d.get("run_id")
    if event == "started":
        trigger = dict(EvolutionRun.Trigger.choices).get(d.get("trigger"), d.get("trigger", ""))
        return gettext("Card update %(run)s started (%(trigger)s)") % {"run": run, "trigger": trigger}
    if event == "tool":
        values = {"tool": d.get("tool", ""), "result": tool_answer(d)}
        if d.get("accepted"):
            return gettext("%(tool)s accepted: %(result)s") % values
        return gettext("%(tool)s refused: %(result)s") % values
    if event == "review":
        return gettext("Card update %(run)s reviews experiences %(eids)s") % {
            "run": run, "eids": ", ".join(d.get("experiences", []))}
    if event == "finished":
        if d.get("changed"):
            return gettext("Card update %(run)s changed the card: %(summary)s") % {
                "run": run, "summary": known(d.get("summary", ""))}
        return gettext("Card update %(run)s finished: %(summary)s") % {
            "run": run, "summary": known(d.get("summary", ""))}
    if event == "skipped":
        return gettext("Card update %(run)s skipped: %(reason)s") % {"run": run, "reason": known(d.get("reason", ""))}
    if event == "failed":
        return gettext("Card update %(run)s failed: %(error)s") % {"run": run, "error": known(d.get("error", ""))}
    return entry.summary
