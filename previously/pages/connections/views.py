"""Model connections in the browser (SPEC O4), staff only: add, edit, remove, list models, test,
and choose the defaults. Keys are sealed at rest and never reach a page, a log or an export."""

import time

import openai
from django.conf import settings
from django.contrib import messages as flash
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from memory.models import Connection, ModelChoice
from memory.recall import embedding
from memory.sealed import Unreadable, seal, unseal
from previously.llm.openai_compat import chat_completions, model_ids, sdk_client
from previously.llm.select import model_lists
from previously.pages.connections.forms import ChoiceForm, ConnectionForm
from previously.pages.current_profile import current_profile
from previously.pages.staff import staff_required

ENV_SETTINGS = ("PREVIOUSLY_LLM_BASE_URL", "PREVIOUSLY_LLM_MODEL", "PREVIOUSLY_AGENT_MODEL", "PREVIOUSLY_EMBEDDINGS",
                "PREVIOUSLY_EMBEDDING_BASE_URL", "PREVIOUSLY_EMBEDDING_MODEL")
TEST_SECONDS = 10


def _client(conn: Connection) -> openai.OpenAI:
    return sdk_client(conn.base_url, unseal(conn.sealed_key), timeout=TEST_SECONDS, max_retries=0)


def in_plain_words(error: Exception) -> str:
    """What went wrong, as a person can act on it (never the key)."""
    if isinstance(error, Unreadable):
        return _("The stored key cannot be read any more (the server's secret changed): enter it again.")
    if isinstance(error, openai.APITimeoutError):
        return _("No answer within %(s)s seconds.") % {"s": TEST_SECONDS}
    if isinstance(error, openai.APIConnectionError):
        return _("The server could not be reached: check the address and that it is running.")
    if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
        return _("The server refused the key (%(code)s).") % {"code": error.status_code}
    if isinstance(error, openai.NotFoundError):
        return _("Not found (404): check the address (it usually ends in /v1) and the model name.")
    if isinstance(error, openai.APIStatusError):
        return _("The server answered %(code)s.") % {"code": error.status_code}
    return _("The request failed: %(kind)s.") % {"kind": type(error).__name__}


def models_of(conn: Connection) -> tuple[list[str], str]:
    """The models the connection lists, or an empty list and the reason in plain words."""
    try:
        return model_ids(_client(conn)), ""
    except (openai.OpenAIError, OSError, Unreadable) as error:
        return [], in_plain_words(error)


@staff_required
def connections(request, choice_form: ChoiceForm | None = None):
    choice = ModelChoice.current()
    context = {
        "profile": current_profile(request),
        "connections": Connection.objects.all(),
        "form": ConnectionForm(),
        "choice_form": choice_form or ChoiceForm(lists=model_lists(stored_only=True), choice=choice),
        "env_set": [name for name in ENV_SETTINGS if getattr(settings, name)],
        "embeddings_from_env": settings.PREVIOUSLY_EMBEDDINGS,
        "result": request.session.pop("connection_test", None),
    }
    return render(request, "connections/connections.html", context, status=400 if choice_form else 200)


@staff_required
def connection_edit(request, pk: int | None = None):
    conn = get_object_or_404(Connection, pk=pk) if pk else None
    form = ConnectionForm(request.POST or None, instance=conn)
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        if form.cleaned_data["api_key"]:
            saved.sealed_key = seal(form.cleaned_data["api_key"])
        saved.save()
        ModelChoice.bump()
        flash.success(request, _("Connection saved."))
        return redirect("connections")
    return render(request, "connections/edit.html", {"form": form, "conn": conn, "profile": current_profile(request)},
                  status=400 if request.method == "POST" else 200)


@staff_required
@require_POST
def connection_delete(request, pk: int):
    get_object_or_404(Connection, pk=pk).delete()
    ModelChoice.bump()
    flash.success(request, _("Connection removed."))
    return redirect("connections")


@staff_required
def connection_models(request, pk: int):
    conn = get_object_or_404(Connection, pk=pk)
    found, problem = models_of(conn)
    return render(request, "connections/connections.html#models", {"conn": conn, "models": found, "problem": problem})


@staff_required
@require_POST
def connection_test(request, pk: int):
    """A tiny request (the model list, then one token from the first or chosen model), with its
    latency or the server's error in plain words."""
    conn = get_object_or_404(Connection, pk=pk)
    started = time.monotonic()
    result = {"conn": conn.pk, "ok": False}
    try:
        client = _client(conn)
        ids = model_ids(client)
        choice = ModelChoice.current()
        model = choice.chat_model if choice.chat_connection_id == conn.pk and choice.chat_model else (ids or [""])[0]
        if model:
            chat_completions(client, {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1})
        result.update(ok=True, ms=round((time.monotonic() - started) * 1000), model=model)
    except (openai.OpenAIError, OSError, Unreadable) as error:
        result["problem"] = in_plain_words(error)
    request.session["connection_test"] = result
    return redirect("connections")


@staff_required
@require_POST
def choose(request):
    choice = ModelChoice.current()
    form = ChoiceForm(request.POST, lists=model_lists(stored_only=True), choice=choice)
    if not form.is_valid():
        return connections(request, choice_form=form)
    for name in ("chat_connection", "chat_model", "agent_model", "embeddings", "embedding_connection",
                 "embedding_model"):
        setattr(choice, name, form.cleaned_data[name])
    choice.save()
    ModelChoice.bump()
    embedding.forget_remote()  # this process at once; the others within PREVIOUSLY_CONNECTION_CHECK_SECONDS
    flash.success(request, _("Defaults saved; every server process uses them within seconds."))
    return redirect("connections")
