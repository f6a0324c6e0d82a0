"""Model connections managed in the browser by staff (SPEC O4): OpenAI-compatible endpoints with
their keys sealed at rest, and which of their models the product uses by default."""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def validate_base_url(value: str) -> None:
    """Any http or https address with a host: a Docker service (`http://ollama:11434/v1`) or a LAN
    name (`http://my-gpu-box:8000/v1`) as well as an IP or a domain, which Django's URLValidator
    refuses for want of a TLD (issue 28 point 1, O4). The error names what is wrong."""
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValidationError(_("The address contains a space or a control character; remove it."), code="spaces")
    try:
        parts = urlsplit(value)
    except ValueError:  # an unclosed IPv6 bracket
        raise ValidationError(_("The address's host is not a valid name or IP address."), code="host") from None
    if parts.scheme.lower() not in ("http", "https") or not value.lower().startswith(f"{parts.scheme.lower()}://"):
        raise ValidationError(
            _("The address must start with http:// or https://, e.g. http://ollama:11434/v1."), code="scheme")
    if not parts.hostname:
        raise ValidationError(_("The address has no host name after “%(scheme)s://”."), code="no_host",
                              params={"scheme": parts.scheme.lower()})
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise ValidationError(_("The address's port must be a number from 1 to 65535."), code="port")


class Connection(models.Model):
    """One OpenAI-compatible endpoint. The key is stored sealed (`memory.sealed`) and never shown."""

    name = models.CharField(max_length=80, blank=True, verbose_name=_("name"))
    base_url = models.CharField(max_length=500, validators=[validate_base_url], verbose_name=_("base URL"))
    sealed_key = models.TextField(blank=True, verbose_name=_("API key (sealed)"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("model connection")
        verbose_name_plural = _("model connections")
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name or self.base_url


class ModelChoice(models.Model):
    """The one row of defaults chosen in the browser; `version` grows with every change of a
    connection or a choice, so every server process notices and picks the provider again."""

    chat_connection = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+", verbose_name=_("chat connection"))
    chat_model = models.CharField(max_length=200, blank=True, verbose_name=_("chat model"))
    agent_model = models.CharField(max_length=200, blank=True, verbose_name=_("agent model"))
    # Hybrid recall's sentence vectors (R8): "" = not chosen here (the in-process model), or the
    # words PREVIOUSLY_EMBEDDINGS takes: `local`, `openai` (a connection's model), `off`.
    embeddings = models.CharField(max_length=10, blank=True, choices=[
        ("local", _("the in-process model")), ("openai", _("a connection's model")), ("off", _("off"))],
        verbose_name=_("embeddings"))
    embedding_connection = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.SET_NULL,
                                             related_name="+", verbose_name=_("embedding connection"))
    embedding_model = models.CharField(max_length=200, blank=True, verbose_name=_("embedding model"))
    version = models.PositiveBigIntegerField(default=0, verbose_name=_("version"))

    class Meta:
        verbose_name = _("model choice")
        verbose_name_plural = _("model choices")

    def __str__(self) -> str:
        return f"{self.chat_connection or '-'}: {self.chat_model or '-'} / {self.agent_model or '-'}"

    @classmethod
    def current(cls) -> "ModelChoice":
        return cls.objects.select_related("chat_connection").get_or_create(pk=1)[0]

    @classmethod
    def bump(cls) -> None:
        """A connection or a choice changed: every process chooses its provider again."""
        cls.objects.get_or_create(pk=1)
        cls.objects.filter(pk=1).update(version=models.F("version") + 1)

    @classmethod
    def stored_embeddings(cls) -> str:
        """The embeddings chosen on the connections page ("" when none was), without writing."""
        return cls.objects.filter(pk=1).values_list("embeddings", flat=True).first() or ""

    @classmethod
    def current_version(cls) -> int:
        return cls.objects.filter(pk=1).values_list("version", flat=True).first() or 0
