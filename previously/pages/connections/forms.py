"""Forms of the connections page (O4)."""

from django import forms
from django.utils.translation import gettext_lazy as _

from memory.models import Connection


class ConnectionForm(forms.ModelForm):
    """Name, base URL (any http or https address with a host, `validate_base_url`) and key; the key is never shown again, and left empty
    when editing it keeps the stored one."""

    api_key = forms.CharField(label=_("API key"), required=False, strip=True,
                              widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                              help_text=_("Stored sealed and never shown again. Leave empty to keep the current key."))

    class Meta:
        model = Connection
        fields = ["name", "base_url"]
        labels = {"name": _("Name (optional)"), "base_url": _("Base URL")}
        help_texts = {"base_url": _("The OpenAI-compatible address, usually ending in /v1, e.g. http://127.0.0.1:11434/v1")}
        widgets = {"base_url": forms.TextInput(attrs={"inputmode": "url", "autocomplete": "off",
                                                      "spellcheck": "false"})}


class ChoiceForm(forms.Form):
    """The defaults: the chat connection and model, the agent's model, and the sentence
    embeddings of recall (R8): in-process, a connection's model, or off."""

    chat_connection = forms.ModelChoiceField(Connection.objects.all(), required=False, label=_("Connection for chat"),
                                             empty_label=_("— none: environment, local Ollama or offline —"))
    chat_model = forms.CharField(label=_("Chat model"), required=False, max_length=200)
    agent_model = forms.CharField(label=_("Card agent model (empty: the chat model)"), required=False, max_length=200)
    embeddings = forms.ChoiceField(label=_("Embeddings for recall by meaning"), required=False, choices=[
        ("local", _("The in-process model (multilingual, nothing to set up)")),
        ("openai", _("A connection's embedding model")),
        ("off", _("Off: recall by words only")),
    ])
    embedding_connection = forms.ModelChoiceField(Connection.objects.all(), required=False,
                                                  label=_("Connection for embeddings"))
    embedding_model = forms.CharField(label=_("Embedding model"), required=False, max_length=200,
                                      help_text=_("Its name as the connection lists it, e.g. nomic-embed-text. "
                                                  "Stored lines are embedded again by themselves after a change."))

    def clean(self):
        data = super().clean()
        if data.get("embeddings") == "openai":
            if not data.get("embedding_connection"):
                self.add_error("embedding_connection", _("Choose the connection whose embedding model to use."))
            if not (data.get("embedding_model") or "").strip():
                self.add_error("embedding_model", _("Type the name of the embedding model."))
        return data
