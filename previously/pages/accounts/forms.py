"""Forms of the account pages (O5): password change through django-axes, invitations, sign-up,
deleting the account."""

from django import forms
from django.contrib.auth import authenticate
from django.contrib.auth.forms import PasswordChangeForm, UserCreationForm
from django.utils.translation import gettext_lazy as _


def _password_checked(request, user, password: str) -> bool:
    """The password checked through `authenticate`, so django-axes counts and locks failures (S3)."""
    return authenticate(request, username=user.get_username(), password=password) is not None


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's password change, with the old password checked as a login attempt is."""

    def __init__(self, user, *args, request=None, **kwargs):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self):
        old = self.cleaned_data["old_password"]
        if not _password_checked(self.request, self.user, old):
            raise forms.ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old


class InvitationForm(forms.Form):
    days = forms.IntegerField(label=_("Valid for (days)"), min_value=1, max_value=30, initial=7)
    note = forms.CharField(label=_("Note (who it is for)"), max_length=200, required=False)


class SignupForm(UserCreationForm):
    pass


class DeleteAccountForm(forms.Form):
    password = forms.CharField(label=_("Your password"), widget=forms.PasswordInput, strip=False)
    confirm = forms.BooleanField(label=_("I understand that everything of mine is deleted for good"))

    def __init__(self, *args, request=None, **kwargs):
        self.request = request
        super().__init__(*args, **kwargs)

    def clean_password(self):
        password = self.cleaned_data["password"]
        if not _password_checked(self.request, self.request.user, password):
            raise forms.ValidationError(_("That is not your password."), code="password_incorrect")
        return password
