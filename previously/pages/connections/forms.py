"""Forms of the connections page (O4)."""

from collections.abc import Sequence

from django import forms
from django.utils.translation import gettext_lazy as _

from memory.models import Connection, ModelChoice
from previously.llm.select import ModelList
from previously.pages.model_choices import choice_value, from_choice_value, listed_choices


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
    embeddings of recall (R8): in-process, a connection's model, or off. Each model is chosen
    from the connections' lists (`listed_choices`, as a companion's settings page does), with a
    name typed instead for a model its server does not list or a server that cannot be reached
    now; with no list at all, typed (issue 28 point 3)."""

    chat_connection = forms.ModelChoiceField(
        Connection.objects.all(), required=False, label=_("Connection for chat"), empty_label=_("— none —"),
        help_text=_("With none: the server's environment if it sets an endpoint, else a local Ollama on its "
                    "default port, else offline."))
    chat_model = forms.CharField(label=_("Chat model"), required=False, max_length=200)
    agent_model = forms.CharField(label=_("Card agent model (empty: the chat model)"), required=False, max_length=200)
    embeddings = forms.ChoiceField(label=_("Embeddings for recall by meaning"), required=False, choices=[
        ("local", _("The in-process model (multilingual, nothing to set up)")),
        ("openai", _("A connection's embedding model")),
        ("off", _("Off: recall by words only")),
    ])
    embedding_connection = forms.ModelChoiceField(Connection.objects.all(), required=False, empty_label=_("— none —"),
                                                  label=_("Connection for embeddings"))
    embedding_model = forms.CharField(label=_("Embedding model"), required=False, max_length=200,
                                      help_text=_("Its name as the connection lists it, e.g. nomic-embed-text. "
                                                  "Stored lines are embedded again by themselves after a change."))

    # Each model field and the connection it is served by.
    MODELS = {"chat_model": "chat_connection", "agent_model": "chat_connection",
              "embedding_model": "embedding_connection"}

    def __init__(self, *args, lists: Sequence[ModelList], choice: ModelChoice, **kwargs):
        super().__init__(*args, initial={
            "chat_connection": choice.chat_connection_id, "embeddings": choice.embeddings or "local",
            "embedding_connection": choice.embedding_connection_id}, **kwargs)
        self.listed = any(found.models for found in lists)
        if not self.listed:
            for name in self.MODELS:
                self.initial[name] = getattr(choice, name)
                self.fields[name].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})
            self.fields["chat_model"].help_text = _("No connection lists its models now: type the model's name.")
            return
        for name, connection in self.MODELS.items():
            field, current = self.fields[name], getattr(choice, name)
            groups, unlisted = listed_choices(lists, connection=getattr(choice, f"{connection}_id"), model=current)
            self.fields[name] = forms.ChoiceField(
                choices=[("", _("— none —") if name != "agent_model" else _("— the chat model —")), *groups],
                required=False, label=field.label,
                help_text=(_("“%(model)s” is no longer listed; it stays the default until you choose another.")
                           % {"model": current}) if unlisted else field.help_text,
            )
            self.initial[name] = choice_value(getattr(choice, f"{connection}_id"), current) if current else ""
            self.fields[f"{name}_typed"] = forms.CharField(
                label=_("… or type its name"), required=False, max_length=200,
                help_text=_("Used instead of the list: a model its server does not list, or a server "
                            "that cannot be reached now (the connection chosen above)."),
                widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
        self.order_fields(["chat_connection", "chat_model", "chat_model_typed", "agent_model", "agent_model_typed",
                           "embeddings", "embedding_connection", "embedding_model", "embedding_model_typed"])

    def _model(self, data: dict, name: str) -> str:
        """The model `name` names, typed or picked; a pick from a list sets the connection it is
        served by when none was chosen, and must be of the chosen one otherwise."""
        typed = (data.get(f"{name}_typed") or "").strip()
        if typed or not self.listed:
            return typed or (data.get(name) or "").strip()
        pk, model = from_choice_value(data.get(name) or "")
        target = self.MODELS[name]
        if pk is None or not model:
            return model
        if data.get(target) is None:
            data[target] = Connection.objects.filter(pk=pk).first()
        elif data[target].pk != pk:
            listed_by = Connection.objects.filter(pk=pk).first()
            self.add_error(name, _("“%(model)s” is listed by %(listed)s, not by the connection chosen above.")
                           % {"model": model, "listed": listed_by or "?"})
        return model

    def clean(self):
        data = super().clean()
        for name in self.MODELS:
            data[name] = self._model(data, name)
        if data.get("embeddings") == "openai":
            if not data.get("embedding_connection"):
                self.add_error("embedding_connection", _("Choose the connection whose embedding model to use."))
            if not data["embedding_model"]:
                self.add_error("embedding_model", _("Choose the embedding model, or type its name."))
        return data
