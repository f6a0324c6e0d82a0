"""A model picked from the endpoints' lists (O4), shared by a companion's settings page and the
connections page's defaults (issue 28 point 3): the option values and the named groups."""

from collections.abc import Sequence

from django.utils.translation import gettext_lazy as _

from previously.llm.select import ModelList


def choice_value(connection: int | None, model: str) -> str:
    """A listed model as the settings form sends it: `<connection id>|<model>`, or the model
    alone for the endpoint in use that is no stored connection."""
    return f"{connection}|{model}" if connection else model


def from_choice_value(value: str) -> tuple[int | None, str]:
    pk, sep, model = value.partition("|")
    return (int(pk), model) if sep and pk.isdigit() else (None, value)


def listed_choices(lists: Sequence[ModelList], *, connection: int | None, model: str) -> tuple[list, bool]:
    """One group per connection, named; the current `model` of `connection` kept with a note
    when no list holds it any more (its server is down, or it was removed there), and whether
    it was (the caller says so in full in the help text: a narrow screen cuts the option's text)."""
    groups = [(found.label, [(choice_value(found.connection, m), m) for m in found.models])
              for found in lists if found.models]
    if model and choice_value(connection, model) not in {value for _label, group in groups for value, _model in group}:
        named = next((found.label for found in lists if found.connection == connection), "")
        note = (_("%(model)s (%(connection)s; no longer listed)") % {"model": model, "connection": named}
                if named else _("%(model)s (no longer listed)") % {"model": model})
        groups.insert(0, (choice_value(connection, model), note))
        return groups, True
    return groups, False
