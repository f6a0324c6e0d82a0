"""Accounts on a self-hosted server (SPEC O5): invitations, the open sign-up switch, and the
signed-in sessions a person can see and end."""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def token_digest(token: str) -> str:
    """Only this digest of an invitation's token is stored; the link itself is shown once."""
    return hashlib.sha256(token.encode()).hexdigest()


class InvitationQuerySet(models.QuerySet):
    def usable(self, now=None):
        return self.filter(used_at__isnull=True, expires_at__gt=now or timezone.now())


class Invitation(models.Model):
    """A sign-up link made by staff; it expires, and works once."""

    digest = models.CharField(max_length=64, unique=True, verbose_name=_("token digest"))
    note = models.CharField(max_length=200, blank=True, verbose_name=_("note"))
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="invitations_made", verbose_name=_("created by"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    used_at = models.DateTimeField(null=True, blank=True, verbose_name=_("used at"))
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="invitation_used", verbose_name=_("used by"))

    objects = InvitationQuerySet.as_manager()

    class Meta:
        verbose_name = _("invitation")
        verbose_name_plural = _("invitations")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation {self.pk} ({self.note})" if self.note else f"invitation {self.pk}"

    @classmethod
    def issue(cls, *, by, days: int, note: str = "") -> tuple["Invitation", str]:
        """A new invitation and its token (to put in the link; not stored)."""
        token = secrets.token_urlsafe(24)
        invitation = cls.objects.create(digest=token_digest(token), note=note, created_by=by,
                                        expires_at=timezone.now() + timedelta(days=days))
        return invitation, token

    @property
    def is_usable(self) -> bool:
        return self.used_at is None and self.expires_at > timezone.now()


class SiteSwitch(models.Model):
    """A switch staff turn on and off in the browser (e.g. open sign-up); off unless a row says on."""

    name = models.CharField(max_length=64, unique=True, verbose_name=_("name"))
    on = models.BooleanField(default=False, verbose_name=_("on"))

    class Meta:
        verbose_name = _("site switch")
        verbose_name_plural = _("site switches")

    OPEN_SIGNUP = "open_signup"

    def __str__(self) -> str:
        return f"{self.name}: {'on' if self.on else 'off'}"

    @classmethod
    def is_on(cls, name: str) -> bool:
        return cls.objects.filter(name=name, on=True).exists()

    @classmethod
    def set(cls, name: str, on: bool) -> None:
        cls.objects.update_or_create(name=name, defaults={"on": on})


class AccountSession(models.Model):
    """What a person sees of one signed-in session: device, address, last seen."""

    session_key = models.CharField(max_length=40, unique=True, verbose_name=_("session key"))
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="account_sessions",
                             verbose_name=_("user"))
    user_agent = models.CharField(max_length=300, blank=True, verbose_name=_("device"))
    ip_address = models.GenericIPAddressField(null=True, blank=True, verbose_name=_("address"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))
    last_seen = models.DateTimeField(default=timezone.now, verbose_name=_("last seen"))

    class Meta:
        verbose_name = _("signed-in session")
        verbose_name_plural = _("signed-in sessions")
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"session of {self.user_id}, last seen {self.last_seen:%Y-%m-%d %H:%M}"
