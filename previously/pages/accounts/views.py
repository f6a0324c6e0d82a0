"""The account pages (SPEC O5): one's sessions, password change and reset, deleting the account;
for staff, people, invitations, open sign-up and one-time reset links."""

from django.contrib import messages as flash
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from memory.accounts import account_contents, delete_account, end_sessions, sessions_of
from memory.models import Invitation, SiteSwitch
from memory.models.accounts import token_digest
from previously.pages.accounts.forms import (
    DeleteAccountForm,
    InvitationForm,
    SignupForm,
    ThrottledPasswordChangeForm,
)
from previously.pages.current_profile import current_profile
from previously.pages.staff import staff_required
from previously.push import end_sessions as close_sockets


class LoginView(auth_views.LoginView):
    """Django's login; the page links to sign-up while staff keep it open."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"open_signup": SiteSwitch.is_on(SiteSwitch.OPEN_SIGNUP)}


@login_required
def account(request):
    """Your account: signed-in sessions (the others can be ended), password, delete."""
    current = request.session.session_key
    sessions = sessions_of(request.user)
    return render(request, "accounts/account.html", {
        "profile": current_profile(request), "sessions": sessions, "current_key": current,
        "others": [s for s in sessions if s.session_key != current],
    })


def _end(user, keys) -> int:
    ended = end_sessions(user, keys)
    close_sockets(ended)
    return len(ended)


def _sign_out_elsewhere(request, user) -> None:
    """Every session of `user` but this request's ends, its chat sockets closed: their password
    was changed, or reset by a link (O5, issue 28 point 5)."""
    current = request.session.session_key
    _end(user, [s.session_key for s in sessions_of(user) if s.session_key != current])


@login_required
@require_POST
def session_end(request):
    """End one other session, or all others (`all`); never the one in use (that is Log out)."""
    current = request.session.session_key
    others = [s.session_key for s in sessions_of(request.user) if s.session_key != current]
    keys = others if request.POST.get("all") else [k for k in request.POST.getlist("session") if k in others]
    n = _end(request.user, keys)
    flash.success(request, ngettext("%(n)d session was signed out.", "%(n)d sessions were signed out.", n) % {"n": n})
    return redirect("account")


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's view; the old password is checked through axes, and every other session of the
    person is signed out (their sockets closed) once the password changes."""

    form_class = ThrottledPasswordChangeForm
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("account")

    def get_form_kwargs(self):
        return super().get_form_kwargs() | {"request": self.request}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"profile": current_profile(self.request)}

    def form_valid(self, form):
        response = super().form_valid(form)
        _sign_out_elsewhere(self.request, self.request.user)
        flash.success(self.request, _("Your password was changed. Your other sessions were signed out."))
        return response


@login_required
def account_delete(request):
    """Delete my account (O5, D6): asks for the password again and offers the export first."""
    form = DeleteAccountForm(request.POST or None, request=request)
    if request.method == "POST" and form.is_valid():
        user = request.user
        keys = [k for k in delete_account(user) if k != request.session.session_key]
        close_sockets(keys)
        logout(request)
        flash.success(request, _("Your account and everything of it were deleted for good."))
        return redirect("login")
    return render(request, "accounts/delete.html", {"form": form, "contents": account_contents(request.user),
                                                    "profile": current_profile(request)})


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's view; a link that was used or has expired answers 404, not a form; once the
    password is reset, every session of the person is signed out, as a change does."""

    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("password_reset_complete")

    def form_valid(self, form):
        response = super().form_valid(form)
        _sign_out_elsewhere(self.request, form.user)
        return response

    def render_to_response(self, context, **kwargs):
        if not context.get("validlink"):
            kwargs["status"] = 404
        return super().render_to_response(context, **kwargs)


# --- sign-up -------------------------------------------------------------------------------


def signup(request, token: str = ""):
    """Make an account: with an invitation's link, or by anyone while staff keep sign-up open."""
    invitation = None
    if token:
        invitation = Invitation.objects.filter(digest=token_digest(token)).first()
        if invitation is None:
            raise Http404("no such invitation")
    if request.user.is_authenticated:
        return redirect("home")
    if invitation is not None:
        if not invitation.is_usable:
            return render(request, "accounts/signup_closed.html", {"expired": True}, status=410)
    elif not SiteSwitch.is_on(SiteSwitch.OPEN_SIGNUP):
        return render(request, "accounts/signup_closed.html", {"expired": False}, status=403)
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        if invitation is not None:
            claimed = Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True).update(
                used_at=timezone.now(), used_by=user)
            if not claimed:  # used meanwhile by someone else: this one does not count
                user.delete()
                return render(request, "accounts/signup_closed.html", {"expired": True}, status=410)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        flash.success(request, _("Welcome! Your account is ready."))
        return redirect("home")
    return render(request, "accounts/signup.html", {"form": form, "invitation": invitation})


# --- staff --------------------------------------------------------------------------------


@staff_required
def people(request):
    """People, invitations, open sign-up, one-time reset links (staff)."""
    context = {
        "profile": current_profile(request),
        "people": get_user_model().objects.order_by("username"),
        "invitations": Invitation.objects.select_related("used_by")[:50],
        "open_signup": SiteSwitch.is_on(SiteSwitch.OPEN_SIGNUP),
        "form": InvitationForm(),
        "new_link": request.session.pop("new_link", ""),
    }
    return render(request, "accounts/people.html", context)


@staff_required
@require_POST
def invite(request):
    form = InvitationForm(request.POST)
    if not form.is_valid():
        flash.error(request, _("Choose between 1 and 30 days."))
        return redirect("people")
    token = Invitation.issue(by=request.user, days=form.cleaned_data["days"], note=form.cleaned_data["note"])[1]
    request.session["new_link"] = request.build_absolute_uri(reverse("signup_invited", args=[token]))
    return redirect("people")


@staff_required
@require_POST
def signup_switch(request):
    SiteSwitch.set(SiteSwitch.OPEN_SIGNUP, request.POST.get("on") == "1")
    return redirect("people")


@staff_required
@require_POST
def reset_link(request, user_id: int):
    """A one-time password reset link for one person (Django's token: it stops working once the
    password changes, and after PASSWORD_RESET_TIMEOUT)."""
    person = get_object_or_404(get_user_model(), pk=user_id)
    if not person.is_active:
        raise Http404("inactive account")
    path = reverse("password_reset_confirm", kwargs={
        "uidb64": urlsafe_base64_encode(force_bytes(person.pk)), "token": default_token_generator.make_token(person)})
    request.session["new_link"] = request.build_absolute_uri(path)
    return redirect("people")
