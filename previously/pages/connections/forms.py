"""Forms of the connections page (O4)."""

from django import forms
from django.core.validators import URLValidator
from django.utils.translation import gettext_lazy as _

from memory.models import Connection


class ConnectionForm(forms.ModelForm):
    """Name, base URL (http or https only) and key; the key is never shown again, and left empty
    when editing it keeps the stored one."""

    api_key = forms.CharField(label=_("API key"), required=False, strip=True,
                              widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                              help_text=_("Stored sealed and never shown again. Leave empty to keep the current key."))

    class Meta:
        model = Connection
        fields = ["name", "base_url"]
        labels = {"name": _("Name (optional)"), "base_url": _("Base URL")}
        help_texts = {"base_url": _("The OpenAI-compatible address, usually ending in /v1, e.g. http://127.0.0.1:11434/v1")}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["base_url"].validators = [URLValidator(schemes=["http", "https"])]
        self.fields["base_url"].error_messages["invalid"] = _("Enter an http:// or https:// address.")
        self.fields["base_url"].assume_scheme = "https"


class ChoiceForm(forms.Form):
    chat_connection = forms.ModelChoiceField(Connection.objects.all(), required=False, label=_("Connection for chat"),
                                             empty_label=_("— none: environment, local Ollama or offline —"))
    chat_model = forms.CharField(label=_("Chat model"), required=False, max_length=200)
    agent_model = forms.CharField(label=_("Card agent model (empty: the chat model)"), required=False, max_length=200)
