"""Texts stored and logged in English, shown in the person's language (issue 25 point 7, U-series).

Some texts have two readers. A tool's answer goes to the model, and the run's log keeps it.
A refused import record is named in a report and in a command's output. The English form
must stay exactly as it is, but a person reading the slice page or the data page in Chinese
should see Chinese. So such a text is made with `say(template, **params)`:

- the result *is* the English string, `template % params`, so every caller, test and log
  that reads it as a string sees what it always saw;
- it also remembers its template and params. `as_data` stores them beside the English text
  (JSON: {"t": template, "p": params}), and `shown` renders them through gettext in the
  active language. Params may themselves be phrases; they are translated too.

Templates are marked with `gettext_noop` where they are written, so the catalogue has them.
Params are what the text names (keys, ids, numbers, the model's own words) and stay as they are.
"""

from typing import Any

from django.utils.translation import gettext, gettext_noop


class Phrase(str):
    """An English text that knows the template and params it was made from."""

    template: str
    params: dict[str, Any]

    def __new__(cls, template: str, params: dict[str, Any]) -> "Phrase":
        text = super().__new__(cls, template % params if params else template)
        text.template, text.params = template, params
        return text

    def __getnewargs__(self):  # pickling (a task's arguments, a cache) keeps the phrase
        return self.template, self.params


def say(template: str, **params: Any) -> Phrase:
    """`template % params` in English, translatable later by `shown`."""
    return Phrase(template, params)


def as_data(text: object) -> dict | None:
    """What to store so the text can be shown translated: a phrase's template and params, or
    None for anything else (the stored English text is then all there is)."""
    if isinstance(text, Phrase):
        return {"t": text.template, "p": {k: _param(v) for k, v in text.params.items()}}
    return None


def _param(value: Any) -> Any:
    if isinstance(value, Phrase):
        return as_data(value)
    if isinstance(value, str):
        return str(value)
    return value if isinstance(value, int | float) or value is None else str(value)


def shown(data: Any, fallback: str = "") -> str:
    """A stored phrase (`as_data`) or a Phrase in the active language; anything else as it is
    (`fallback` when there is nothing)."""
    if isinstance(data, Phrase):
        data = as_data(data)
    if isinstance(data, dict) and isinstance(data.get("t"), str):
        params = {k: shown(v) for k, v in (data.get("p") or {}).items()}
        for template in (gettext(data["t"]), data["t"]):
            try:
                return template % params if params else template
            except (KeyError, TypeError, ValueError):  # params that no longer fit the template
                continue
        return data["t"]
    if data is None or data == "":
        return fallback
    return data if isinstance(data, str) else str(data)


# Python's json module explains a parse error in English; these are all it says (3.12-3.13).
JSON_ERRORS = {
    "Expecting value": gettext_noop("Expecting value"),
    "Expecting property name enclosed in double quotes": gettext_noop("Expecting property name enclosed in double quotes"),
    "Expecting ':' delimiter": gettext_noop("Expecting ':' delimiter"),
    "Expecting ',' delimiter": gettext_noop("Expecting ',' delimiter"),
    "Unterminated string starting at": gettext_noop("Unterminated string starting at"),
    "Invalid control character at": gettext_noop("Invalid control character at"),
    "Invalid \\escape": gettext_noop("Invalid \\escape"),
    "Invalid \\uXXXX escape": gettext_noop("Invalid \\uXXXX escape"),
    "Extra data": gettext_noop("Extra data"),
    "Illegal trailing comma before end of object": gettext_noop("Illegal trailing comma before end of object"),
    "Illegal trailing comma before end of array": gettext_noop("Illegal trailing comma before end of array"),
}


def json_error(msg: str) -> str:
    """A json.JSONDecodeError's `msg`, as a phrase when it is one the json module says."""
    return say(JSON_ERRORS[msg]) if msg in JSON_ERRORS else msg
