"""The archive's search form (A4)."""

from django import forms
from django.utils.translation import gettext_lazy as _


class ArchiveSearchForm(forms.Form):
    q = forms.CharField(label=_("Search"), required=False, max_length=500)
    sort = forms.ChoiceField(
        label=_("Order"),
        required=False,
        choices=[("relevance", _("Most relevant first")), ("newest", _("Newest first"))],
    )
    speaker = forms.ChoiceField(
        label=_("Who said it"),
        required=False,
        choices=[("", _("Anyone")), ("user", _("You")), ("assistant", _("Your companion"))],
    )
    date_from = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            raise forms.ValidationError(_("“From” is after “To”."))
        return data
