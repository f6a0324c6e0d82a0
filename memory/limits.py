"""Every stored text's limit (SPEC S6), in one place.

A limit is a number of characters read from a setting (its default is in
`previously/tunables.py`, its meaning in the README's settings table). `check` refuses a text over
it with `TextTooLong`, whose message names the record, the limit and the setting that changes it,
in the active language. Callers check before they write anything, so a refusal stores nothing.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_lazy


class TextTooLong(ValueError):
    """A text over its stated limit; `str()` is the refusal a person reads."""

    def __init__(self, *, limit: "TextLimit", length: int, record: str = "") -> None:
        self.limit = limit
        self.length = length
        self.record = record
        super().__init__(self.message())

    def message(self) -> str:
        params = {
            "what": self.limit.what,
            "length": self.length,
            "limit": self.limit.chars,
            "setting": self.limit.setting,
        }
        text = gettext(
            "%(what)s is %(length)s characters long; the limit is %(limit)s (%(setting)s)."
        ) % params
        if self.limit.advice:
            text = f"{text} {self.limit.advice}"
        return f"{self.record}: {text}" if self.record else text


@dataclass(frozen=True)
class TextLimit:
    """The limit of one kind of stored text."""

    setting: str
    what: str | Promise
    advice: str | Promise = ""  # what the person can do instead, said after the refusal

    @property
    def chars(self) -> int:
        return getattr(settings, self.setting)

    def exceeded_by(self, text: str | None) -> bool:
        return text is not None and len(text) > self.chars

    def check(self, text: str | None, *, record: str = "") -> None:
        """Refuse `text` over the limit (`record` names where it came from, e.g. a mid)."""
        if self.exceeded_by(text):
            raise TextTooLong(limit=self, length=len(text), record=record)

    def validator(self, value) -> None:
        """A form field's validator: the same refusal as a ValidationError (nothing is saved)."""
        try:
            self.check(value)
        except TextTooLong as too_long:
            raise ValidationError(str(too_long), code="too_long") from None


MESSAGE = TextLimit(
    "PREVIOUSLY_MAX_MESSAGE_CHARS", gettext_lazy("A message"),
    gettext_lazy("Nothing was saved: shorten it, or send it in several messages."),
)
PERSONA = TextLimit("PREVIOUSLY_MAX_PERSONA_CHARS", gettext_lazy("A persona"))
FIELD = TextLimit("PREVIOUSLY_MAX_FIELD_CHARS", gettext_lazy("This text"))
