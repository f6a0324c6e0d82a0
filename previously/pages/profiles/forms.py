"""Forms of the profile pages (P1, P2)."""

from collections.abc import Sequence

from django import forms
from django.utils.translation import gettext_lazy as _

from memory import limits
from memory.clock import is_zone
from memory.models import Profile
from memory.models.archive import PROFILE_KEY_RE
from previously.llm.select import ModelList
from previously.pages.model_choices import choice_value, from_choice_value, listed_choices

HOURS = [("", _("— none of its own —")), *((h, f"{h:02d}:00") for h in range(24))]


class ProfileEditForm(forms.ModelForm):
    """Name, persona and language; the key is fixed once made (legacy keys and hashes use it)."""

    class Meta:
        model = Profile
        fields = ["name", "persona", "language"]
        labels = {
            "name": _("Name"),
            "persona": _("Persona (the identity constitution)"),
            "language": _("Language of the companion"),
        }
        help_texts = {
            "name": _("Shown in the app; leave empty to show the key."),
            "persona": _("Who the companion is, in its own words. It opens every prompt."),
            "language": _("The companion replies and tells relative times in this language."),
        }
        widgets = {"persona": forms.Textarea(attrs={"rows": 6})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["persona"].validators.append(limits.PERSONA.validator)  # S6 (issue 24 point 5)


class CompanionSettingsForm(ProfileEditForm):
    """The companion settings page (issue 17 point 8): who it is, which model answers and how
    warmly, when it may write first, and the person's time zone. Empty means the environment's."""

    class Meta(ProfileEditForm.Meta):
        fields = ["name", "persona", "language", "model", "temperature", "proactive_enabled",
                  "quiet_from", "quiet_until", "tz"]
        labels = {
            **ProfileEditForm.Meta.labels,
            "model": _("Model"),
            "temperature": _("Temperature"),
            "proactive_enabled": _("May write first (proactive messages)"),
            "quiet_from": _("Quiet from"),
            "quiet_until": _("Quiet until"),
            "tz": _("Your time zone"),
        }
        help_texts = {
            **ProfileEditForm.Meta.help_texts,
            "temperature": _("0 to 2; lower is steadier, higher more varied. Empty: the model server’s default."),
            "quiet_from": _("From this hour to the “until” hour (your time) the companion does not write first."),
            "quiet_until": _("Neither set: the server’s hours apply."),
            "tz": _("An IANA name such as Asia/Shanghai or Europe/Berlin; the chat keeps it up to date."),
        }

    def __init__(self, *args, lists: Sequence[ModelList], default_model: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.lists = lists
        field = self.fields["model"]
        default = _("The server’s default (%(model)s)") % {"model": default_model or "—"}
        if any(found.models for found in lists):
            choices, unlisted = listed_choices(lists, connection=self.instance.model_connection_id,
                                               model=self.instance.model)
            self.fields["model"] = forms.ChoiceField(
                choices=[("", default), *choices], required=False, label=field.label,
                help_text=_(
                    "“%(model)s” is no longer listed; it stays this companion’s model until you choose another."
                ) % {"model": self.instance.model} if unlisted else _("The models each connection lists, under its name."),
            )
            self.initial["model"] = choice_value(self.instance.model_connection_id, self.instance.model)
        else:
            field.help_text = _(
                "No connection lists its models now: type a model name, or leave empty for %(default)s."
            ) % {"default": default}
            field.widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})
        self.fields["temperature"].widget.attrs.update({"min": "0", "max": "2", "step": "0.1"})
        for name in ("quiet_from", "quiet_until"):
            self.fields[name] = forms.TypedChoiceField(
                choices=HOURS, coerce=int, empty_value=None, required=False,
                label=self.fields[name].label, help_text=self.fields[name].help_text,
            )
        self.fields["tz"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})

    def clean_model(self):
        value = (self.cleaned_data.get("model") or "").strip()
        if isinstance(self.fields["model"], forms.ChoiceField):
            self.instance.model_connection_id, value = from_choice_value(value)
        elif value != self.instance.model:
            self.instance.model_connection_id = None  # a typed name goes to the default connection
        return value

    def clean_tz(self):
        tz = (self.cleaned_data.get("tz") or "").strip()
        if tz and not is_zone(tz):
            raise forms.ValidationError(
                _("“%(tz)s” is not a time zone this server knows; use a name such as Asia/Shanghai."),
                code="invalid_zone", params={"tz": tz},
            )
        return tz

    def clean(self):
        data = super().clean()
        start, end = data.get("quiet_from"), data.get("quiet_until")
        if (start is None) != (end is None):
            raise forms.ValidationError(
                _("Quiet hours need both a start and an end, or neither."), code="quiet_half"
            )
        if start is not None and start == end:
            raise forms.ValidationError(
                _("Quiet hours cannot start and end at the same hour."), code="quiet_empty"
            )
        return data


class ProfileCreateForm(ProfileEditForm):
    class Meta(ProfileEditForm.Meta):
        fields = ["key", "name", "persona", "language"]
        labels = {**ProfileEditForm.Meta.labels, "key": _("Key")}
        help_texts = {
            **ProfileEditForm.Meta.help_texts,
            "key": _("1–32 characters: a–z, 0–9, “_” or “-”. It cannot be changed later."),
        }

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["key"].initial = ""
        self.fields["key"].widget.attrs.update({"autocomplete": "off", "pattern": "[a-z0-9_-]{1,32}"})

    def clean_key(self):
        key = self.cleaned_data["key"]
        if not PROFILE_KEY_RE.match(key):
            raise forms.ValidationError(
                _("A key is 1–32 characters of a–z, 0–9, “_” or “-”."), code="invalid_profile_key"
            )
        if Profile.objects.for_user(self.user).filter(key=key).exists():
            raise forms.ValidationError(_("You already have a companion with this key."), code="taken")
        return key

    def save(self, commit=True):
        self.instance.user = self.user
        return super().save(commit=commit)


class ProfileDeleteForm(forms.Form):
    confirm_key = forms.CharField(label=_("Type the key to confirm"), max_length=32)

    def __init__(self, *args, profile, **kwargs):
        super().__init__(*args, **kwargs)
        self.profile = profile
        self.fields["confirm_key"].widget.attrs.update({"autocomplete": "off"})

    def clean_confirm_key(self):
        value = self.cleaned_data["confirm_key"].strip()
        if value != self.profile.key:
            raise forms.ValidationError(_("That is not this companion’s key; nothing was deleted."))
        return value
