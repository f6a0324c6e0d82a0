"""Forms of the profile pages (P1, P2)."""

from django import forms
from django.utils.translation import gettext_lazy as _

from memory.models import Profile
from memory.models.archive import PROFILE_KEY_RE


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
