"""Curation pages and actions (SPEC C1-C7, D1-D2): favourite, hide, delete, review, relate.

Every view is scoped to one of the signed-in user's profiles (P2): another user's profile,
message, experience or relation is a 404. htmx requests get a fragment of the page's
template; plain form posts redirect back (or render a confirmation page), so all of it
works without JavaScript.
"""

import json
import math
from collections import defaultdict

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from memory import limits
from memory.curation import (
    ExperienceRefused,
    HighlightRefused,
    RelationRefused,
    add_favourite,
    find_item,
    link,
    propose_experience,
    remove_favourite,
)
from memory.deletion import HasRefs, MessageNotFound, delete_message, hide_message, unhide_message
from memory.models import (
    Experience,
    ExperienceHistory,
    Favourite,
    Highlight,
    Message,
    Profile,
    Relation,
)
from memory.models.archive import PROFILE_KEY_RE
from memory.models.curation import ExperienceStateError
from memory.phrases import shown
from previously.pages.curation.forms import (
    ExperienceEditForm,
    ExperienceForm,
    RelationForm,
    label_of,
)
from previously.pages.forget_refs import backup_note, refs_context
from previously.pages.refusals import refusal
from previously.pages.safe_urls import local_path

ACTIONS_PARTIAL = "curation/message_actions.html#actions"


def _profile(request, key: str) -> Profile:
    return get_object_or_404(Profile, user=request.user, key=key)


def _message(profile: Profile, mid: str) -> Message:
    return get_object_or_404(Message, profile=profile, mid=mid)


def _back(request, fallback: str):
    return redirect(local_path(request.POST.get("next") or request.GET.get("next")) or fallback)


# --- messages: favourite, hide, delete (C2, D1, D2) -----------------------------------


@login_required
def message_list(request, profile_key):
    """The profile's messages, newest first, each with its favourite/hide/delete actions."""
    profile = _profile(request, profile_key)
    page = Paginator(Message.objects.for_profile(profile).order_by("-created_at", "-id"), 50).get_page(
        request.GET.get("page")
    )
    return render(request, "curation/messages.html", {"profile": profile, "page": page})


DELETE_STATUS = {
    "deleted": gettext_lazy("deleted for good"),
    "already_gone": gettext_lazy("already gone"),
    "hidden": gettext_lazy("hidden"),
    "already_hidden": gettext_lazy("already hidden"),
}


def _status_text(status: str) -> str:
    return str(DELETE_STATUS.get(status, status.replace("_", " ")))


def _actions(request, profile, message, *, notice="", notice_kind="ok", refs=None, status=200, gone=False):
    context = {"profile": profile, "message": message, "notice": notice, "notice_kind": notice_kind, "gone": gone,
               **refs_context(refs, made_at=message.created_at if message else None)}
    return render(request, ACTIONS_PARTIAL, context, status=status)


@login_required
@require_POST
def favourite(request, profile_key, mid):
    """Favourite the whole message, or the part in `excerpt` (C2); refused unless verbatim (C1)."""
    profile = _profile(request, profile_key)
    message = _message(profile, mid)
    try:
        fav = add_favourite(profile=profile, message=message, excerpt=request.POST.get("excerpt", ""))
    except HighlightRefused as refused:
        notice, ok = gettext("Not saved: %(reason)s") % {"reason": refusal(refused)}, False
    else:
        notice, ok = gettext("Saved to favourites ★"), True
    if request.htmx:
        response = _actions(request, profile, message, notice=notice, notice_kind="ok" if ok else "error")
        if ok:
            trigger_client_event(response, "favourited", {"mid": mid, "hid": fav.highlight.hid})
        return response
    (flash.success if ok else flash.error)(request, notice)
    return _back(request, reverse("curation:messages", args=[profile.key]))


@login_required
@require_POST
def hide(request, profile_key, mid):
    """Soft delete (D1 "hide"): out of recall at once, reversible with unhide."""
    return _set_hidden(
        request, profile_key, mid, hide_message, gettext("Hidden"), "message-hidden",
        gettext("Message %(mid)s hidden.") % {"mid": mid},
    )


@login_required
@require_POST
def unhide(request, profile_key, mid):
    return _set_hidden(
        request, profile_key, mid, unhide_message, gettext("Restored"), "message-unhidden",
        gettext("Message %(mid)s restored.") % {"mid": mid},
    )


def _set_hidden(request, profile_key, mid, apply, notice, event, flash_text):
    """Hide and unhide share one shape: apply, then the htmx fragment with its client event,
    or a flash and the way back."""
    profile = _profile(request, profile_key)
    message = _message(profile, mid)
    apply(message)
    if request.htmx:
        return trigger_client_event(_actions(request, profile, message, notice=notice), event, {"mid": mid})
    flash.success(request, flash_text)
    return _back(request, reverse("curation:messages", args=[profile.key]))


@login_required
@require_POST
def delete(request, profile_key, mid):
    """Delete for good (D2). Referenced: first a confirmation listing the refs (D1), then `force`."""
    profile = _profile(request, profile_key)
    force = request.POST.get("force") == "1"
    made_at = Message.objects.filter(profile=profile, mid=mid).values_list("created_at", flat=True).first()
    try:
        result = delete_message(
            profile=profile, mid=mid, hard=True, force=force,
            keep_replies=request.POST.get("keep_replies") == "1", drop_lines=request.POST.getlist("drop_line"),
        )
    except MessageNotFound as e:
        raise Http404(str(e)) from e
    except HasRefs as refused:
        message = _message(profile, mid)
        if request.htmx:
            return _actions(request, profile, message, refs=refused.refs)
        context = {"profile": profile, "message": message, "next": local_path(request.POST.get("next")) or "",
                   **refs_context(refused.refs, made_at=message.created_at)}
        return render(request, "curation/delete_confirm.html", context, status=409)
    held = backup_note(made_at) if result.status == "deleted" else ""
    if request.htmx:
        response = _actions(request, profile, None, notice=" ".join(filter(None, [gettext("Deleted for good"), held])),
                            gone=True)
        return trigger_client_event(response, "message-deleted", {"mid": mid, "status": result.status})
    flash.success(request, " ".join(filter(None, [
        gettext("Message %(mid)s: %(status)s.") % {"mid": mid, "status": _status_text(result.status)}, held])))
    return _back(request, reverse("curation:messages", args=[profile.key]))


@login_required
@require_POST
def api_delete(request, profile_key, mid):
    """JSON API: body {"mode": "hard"|"soft", "force": bool} → 200, 404 or 409 {"error": "has_refs", "refs": […]}."""
    if not PROFILE_KEY_RE.match(profile_key):
        return JsonResponse({"error": "invalid_profile", "detail": "profile keys match ^[a-z0-9_-]{1,32}$"}, status=400)
    profile = _profile(request, profile_key)
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return JsonResponse({"error": "bad_json"}, status=400)
    mode = body.get("mode", "hard")
    if mode not in ("hard", "soft") or not isinstance(body.get("force", False), bool):
        return JsonResponse({"error": "bad_request", "detail": "mode is hard or soft; force is a boolean"}, status=400)
    try:
        result = delete_message(
            profile=profile, mid=mid, hard=mode == "hard", force=body.get("force", False),
            keep_replies=body.get("keep_replies") is True, drop_lines=[str(k) for k in body.get("drop_lines", [])],
        )
    except MessageNotFound:
        return JsonResponse({"error": "not_found", "mid": mid}, status=404)
    except HasRefs as refused:
        return JsonResponse({"error": "has_refs", "refs": refused.refs}, status=409)
    return JsonResponse(result.as_dict())


# --- favourites (C2) -------------------------------------------------------------------


@login_required
def favourite_list(request, profile_key):
    """The profile's favourites, newest first, each with the way back to its line."""
    profile = _profile(request, profile_key)
    favourites = Favourite.objects.for_profile(profile).select_related("message__slice").order_by("-created_at", "-id")
    page = Paginator(favourites, 50).get_page(request.GET.get("page"))
    return render(request, "curation/favourites.html", {"profile": profile, "page": page})


@login_required
@require_POST
def favourite_remove(request, profile_key, pk):
    """Unfavourite (C2): the favourite and its highlight go; the message stays."""
    profile = _profile(request, profile_key)
    remove_favourite(get_object_or_404(Favourite, profile=profile, pk=pk))
    if request.htmx:
        return HttpResponse("")
    flash.success(request, gettext("Removed from favourites"))
    return _back(request, reverse("curation:favourites", args=[profile.key]))


# --- highlights (C1, C7) --------------------------------------------------------------


@login_required
def highlight_list(request, profile_key):
    profile = _profile(request, profile_key)
    highlights = Highlight.objects.for_profile(profile).live().select_related("message")
    return render(request, "curation/highlights.html", {"profile": profile, "highlights": highlights})


@login_required
@require_POST
def highlight_delete(request, profile_key, hid):
    """Soft-delete a highlight and its relations (C7); its message stays (C1)."""
    profile = _profile(request, profile_key)
    highlight = get_object_or_404(Highlight, profile=profile, hid=hid)
    return _soft_delete(
        request,
        highlight,
        gettext("Highlight deleted; its relations were removed too."),
        lambda: _back(request, reverse("curation:highlights", args=[profile.key])),
    )


def _soft_delete(request, record, notice, back):
    """Soft-delete a highlight or relation: an empty fragment for htmx (the row goes), otherwise
    a flash and `back()`."""
    record.soft_delete()
    if request.htmx:
        return HttpResponse("")
    flash.success(request, notice)
    return back()


# --- experiences (C3-C5) --------------------------------------------------------------


def _experiences_context(profile, form=None):
    qs = (
        Experience.objects.for_profile(profile)
        .live()
        .prefetch_related("source_links", "history__actor_user")
        .order_by("-recorded_at", "id")
    )
    groups = {"candidates": [], "active": [], "past": []}
    for e in qs:
        if e.invalid_at is None and e.status == Experience.Status.CANDIDATE:
            groups["candidates"].append(e)
        elif e.invalid_at is None and e.status == Experience.Status.ACTIVE:
            groups["active"].append(e)
        else:
            groups["past"].append(e)
    return {"profile": profile, "form": form or ExperienceForm(), **groups}


@login_required
def experience_list(request, profile_key):
    """The review page: candidates to confirm or reject, what is believed, what no longer holds."""
    profile = _profile(request, profile_key)
    form = None
    if request.method == "POST":
        form = ExperienceForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                propose_experience(
                    profile=profile,
                    title=data["title"],
                    content=data["content"],
                    source_mids=data["source_mids"],
                    event_time=data["event_time"],
                    time_certainty=data["time_certainty"],
                    actor=ExperienceHistory.Actor.USER,
                    actor_user=request.user,
                    confirm=data["confirm"],
                )
            except ExperienceRefused as refused:
                form.add_error("source_mids" if refused.missing_mids else None, shown(refused.reason))
            else:
                flash.success(request, gettext("Experience recorded."))
                return redirect("curation:experiences", profile.key)
    return render(request, "curation/experiences.html", _experiences_context(profile, form))


EXPERIENCE_ACTIONS = {"confirm", "reject", "invalidate", "revalidate", "delete"}


@login_required
@require_POST
def experience_action(request, profile_key, eid, action):
    """Confirm, reject, invalidate, revalidate or delete one experience, as the user (C3-C5, C7)."""
    if action not in EXPERIENCE_ACTIONS:
        raise Http404
    profile = _profile(request, profile_key)
    experience = get_object_or_404(Experience.objects.live(), profile=profile, eid=eid)
    reason = request.POST.get("reason", "")
    try:
        limits.FIELD.check(reason)  # S6: kept in the history; refused before anything changes
        if action == "delete":
            experience.soft_delete(by=request.user, reason=reason)
        else:
            getattr(experience, action)(by=request.user, reason=reason)
    except (ExperienceStateError, limits.TextTooLong) as e:
        flash.error(request, str(e))
    if request.htmx:
        if experience.deleted_at:
            return HttpResponse("")
        experience = Experience.objects.prefetch_related("source_links", "history").get(pk=experience.pk)
        return render(request, "curation/experiences.html#experience", {"profile": profile, "e": experience})
    return redirect("curation:experiences", profile.key)


@login_required
def experience_edit(request, profile_key, eid):
    profile = _profile(request, profile_key)
    experience = get_object_or_404(Experience.objects.live(), profile=profile, eid=eid)
    initial = {k: getattr(experience, k) for k in ("title", "content", "event_time", "time_certainty")}
    form = ExperienceEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        changes = {k: form.cleaned_data[k] for k in initial}
        experience.edit(by=request.user, reason=form.cleaned_data["reason"], **changes)
        flash.success(request, gettext("Experience updated; the previous version is in its history."))
        return redirect("curation:experiences", profile.key)
    others = Experience.objects.for_profile(profile).valid().exclude(pk=experience.pk)
    return render(
        request, "curation/experience_edit.html", {"profile": profile, "e": experience, "form": form, "others": others}
    )


@login_required
@require_POST
def experience_merge(request, profile_key, eid):
    """Merge another experience into this one (C4): sources combined, the other invalidated."""
    profile = _profile(request, profile_key)
    survivor = get_object_or_404(Experience.objects.live(), profile=profile, eid=eid)
    other = get_object_or_404(Experience.objects.live(), profile=profile, eid=request.POST.get("other", ""))
    try:
        reason = request.POST.get("reason", "")
        limits.FIELD.check(reason)  # S6
        survivor.merge(other, by=request.user, reason=reason)
    except (ExperienceStateError, limits.TextTooLong) as e:
        flash.error(request, str(e))
    else:
        flash.success(request, gettext("Merged “%(other)s” into “%(survivor)s”.") % {"other": other.title, "survivor": survivor.title})
    return redirect("curation:experiences", profile.key)


# --- relations (C6, C7) ---------------------------------------------------------------


def _graph(items, relations):
    """Positions for a small server-rendered SVG: items on a circle, relations as arrows."""
    ids = []
    for r in relations:
        for end in (r.from_id, r.to_id):
            if end not in ids:
                ids.append(end)
    if not ids:
        return None
    size, radius = 360, 130
    labels = {item.item_id: label_of(item) for item in items}
    nodes = {}
    for i, item_id in enumerate(ids):
        angle = 2 * math.pi * i / len(ids) - math.pi / 2
        nodes[item_id] = {
            "id": item_id,
            "x": round(size / 2 + radius * math.cos(angle), 1),
            "y": round(size / 2 + radius * math.sin(angle), 1),
            "label": labels.get(item_id, item_id)[:24],
            "kind": "exp" if item_id in {e.item_id for e in items if isinstance(e, Experience)} else "hl",
        }
    edges = []
    for r in relations:
        a, b = nodes[r.from_id], nodes[r.to_id]
        # Stop the arrow short of the target's circle.
        dx, dy = b["x"] - a["x"], b["y"] - a["y"]
        dist = math.hypot(dx, dy) or 1
        edges.append({
            "x1": a["x"] + dx * 14 / dist, "y1": a["y"] + dy * 14 / dist,
            "x2": b["x"] - dx * 18 / dist, "y2": b["y"] - dy * 18 / dist,
            "mx": round((a["x"] + b["x"]) / 2, 1), "my": round((a["y"] + b["y"]) / 2, 1),
            "type": r.get_type_display(),
        })
    return {"size": size, "nodes": list(nodes.values()), "edges": edges}


@login_required
def relation_list(request, profile_key):
    """Relations at a glance: grouped by item, arrows to what it relates to, and a small graph."""
    profile = _profile(request, profile_key)
    items = [
        *Highlight.objects.for_profile(profile).live(),
        *Experience.objects.for_profile(profile).live(),
    ]
    form = RelationForm(request.POST or None, items=items)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            link(
                profile=profile,
                from_item=find_item(profile, data["from_id"]),
                to_item=find_item(profile, data["to_id"]),
                type=data["type"],
            )
        except RelationRefused as refused:
            form.add_error(None, shown(refused.reason))
        else:
            flash.success(request, gettext("Relation added."))
            return redirect("curation:relations", profile.key)
    relations = list(
        Relation.objects.for_profile(profile).live().select_related(
            "from_highlight", "from_experience", "to_highlight", "to_experience"
        ).order_by("created_at", "id")
    )
    labels = {item.item_id: label_of(item) for item in items}
    by_item = defaultdict(list)
    for r in relations:
        r.from_label, r.to_label = labels.get(r.from_id, r.from_id), labels.get(r.to_id, r.to_id)
        by_item[r.from_id].append(r)
    groups = [
        {"item": item, "label": label_of(item), "outgoing": by_item[item.item_id]}
        for item in items
        if by_item[item.item_id]
    ]
    context = {
        "profile": profile,
        "form": form,
        "groups": groups,
        "relations": relations,
        "graph": _graph(items, relations),
    }
    return render(request, "curation/relations.html", context)


@login_required
@require_POST
def relation_delete(request, profile_key, rid):
    profile = _profile(request, profile_key)
    relation = get_object_or_404(Relation, profile=profile, rid=rid)
    return _soft_delete(request, relation, gettext("Relation removed."), lambda: redirect("curation:relations", profile.key))
