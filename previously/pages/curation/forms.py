"""Forms of the curation pages (C3-C6)."""

import re

from django import forms
from django.utils.translation import gettext_lazy as _

from memory import limits
from memory.models import Experience, Relation


class ExperienceForm(forms.Form):
    title = forms.CharField(max_length=300, label=_("Title"))
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), label=_("Content"),
                              validators=[limits.FIELD.validator])  # S6
    source_mids = forms.CharField(
        validators=[limits.FIELD.validator],
        label=_("Source message ids"),
        help_text=_("One or more message ids (c_…/a_…), separated by spaces or commas."),
    )
    event_time = forms.DateTimeField(
        required=False, label=_("When it happened"), widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    time_certainty = forms.ChoiceField(choices=Experience.TimeCertainty.choices, initial="unknown", label=_("Time certainty"))
    confirm = forms.BooleanField(required=False, initial=True, label=_("It is true (record it as confirmed)"))

    def clean_source_mids(self):
        return [m for m in re.split(r"[\s,]+", self.cleaned_data["source_mids"]) if m]


class ExperienceEditForm(forms.Form):
    title = forms.CharField(max_length=300, label=_("Title"))
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), label=_("Content"),
                              validators=[limits.FIELD.validator])  # S6
    event_time = forms.DateTimeField(
        required=False, label=_("When it happened"), widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    time_certainty = forms.ChoiceField(choices=Experience.TimeCertainty.choices, label=_("Time certainty"))
    reason = forms.CharField(max_length=500, required=False, label=_("Why (kept in the history)"))


class RelationForm(forms.Form):
    from_id = forms.ChoiceField(label=_("From"))
    type = forms.ChoiceField(choices=Relation.Type.choices, label=_("Relation"))
    to_id = forms.ChoiceField(label=_("To"))

    def __init__(self, *args, items=(), **kwargs):
        super().__init__(*args, **kwargs)
        choices = [(item.item_id, label_of(item)) for item in items]
        self.fields["from_id"].choices = choices
        self.fields["to_id"].choices = choices


def label_of(item) -> str:
    text = item.title if isinstance(item, Experience) else f"“{item.content}”"
    return (text[:60] + "…") if len(text) > 60 else text
