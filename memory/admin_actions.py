"""Admin actions for review (C3) and soft-delete cleanup (D4); they call the same domain verbs."""

import hashlib

from django.contrib import admin, messages
from django.db import transaction
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory.deletion import keep_records, message_refs, purge_records, restore_records
from memory.models import ExperienceHistory, ExperienceSource, Highlight, Message
from memory.models.archive import OBJECT_ID_RE


@admin.action(description=_("Confirm selected candidate experiences"), permissions=["change"])
def confirm_experiences(modeladmin, request, queryset):
    changed = sum(e.confirm(by=request.user, actor=ExperienceHistory.Actor.ADMIN) for e in _valid(queryset))
    modeladmin.message_user(request, gettext("Confirmed %(count)d experience(s).") % {"count": changed}, messages.SUCCESS)


@admin.action(description=_("Reject selected experiences"), permissions=["change"])
def reject_experiences(modeladmin, request, queryset):
    changed = sum(e.reject(by=request.user, actor=ExperienceHistory.Actor.ADMIN) for e in _valid(queryset))
    modeladmin.message_user(request, gettext("Rejected %(count)d experience(s).") % {"count": changed}, messages.SUCCESS)


def _valid(queryset):
    return queryset.filter(deleted_at__isnull=True, invalid_at__isnull=True)


@admin.action(description=_("Purge selected soft-deleted rows for good (tombstones)"), permissions=["delete"])
def purge_soft_deleted(modeladmin, request, queryset):
    """D4: first a dry-run count on a confirmation page; on confirm purge in batches and report."""
    soft = queryset.filter(deleted_at__isnull=False)
    if request.POST.get("post") == "yes":
        report = purge_records(soft, batch=200)
        summary = ", ".join(f"{label}: {n}" for label, _kind, n in report.rows() if n) or gettext("nothing")
        modeladmin.message_user(
            request, gettext("Purged. Tombstones written — %(summary)s.") % {"summary": summary}, messages.SUCCESS
        )
        return None
    cascade = []
    if queryset.model is Message:
        cascade = [(m.mid, message_refs(m)) for m in soft[:200]]
        cascade = [(mid, refs) for mid, refs in cascade if refs]
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": gettext("Purge soft-deleted rows for good?"),
        "opts": modeladmin.model._meta,
        "selected": queryset.count(),
        "soft": soft.count(),
        "live": queryset.count() - soft.count(),
        "rows": soft[:50],
        "cascade": cascade,
        "ids": list(queryset.values_list("pk", flat=True)),
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/memory/purge_confirmation.html", context)


@admin.action(description=_("Keep selected deleted: mark the soft deletes reviewed"), permissions=["change"])
def keep_soft_deleted(modeladmin, request, queryset):
    """D4 "keep": they stay deleted and out of recall; only `reviewed_at` is set."""
    kept = keep_records(queryset)
    modeladmin.message_user(
        request, gettext("Kept %(count)d row(s) deleted and marked them reviewed.") % {"count": kept}, messages.SUCCESS
    )


@admin.action(description=_("Restore selected soft-deleted rows (undo the delete)…"), permissions=["change"])
def restore_soft_deleted(modeladmin, request, queryset):
    """D4 "restore": explicit, after a confirmation page listing what comes back into recall."""
    soft = queryset.filter(deleted_at__isnull=False)
    if request.POST.get("post") == "yes":
        restored = restore_records(soft)
        modeladmin.message_user(
            request,
            gettext("Restored %(count)d row(s): they are live again and back in recall.") % {"count": restored},
            messages.SUCCESS,
        )
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": gettext("Restore soft-deleted rows?"),
        "opts": modeladmin.model._meta,
        "soft": soft.count(),
        "rows": soft[:50],
        "ids": list(queryset.values_list("pk", flat=True)),
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/memory/restore_confirmation.html", context)


@admin.action(description=_("Repair message ids that are not valid ids"), permissions=["change"])
def repair_message_ids(modeladmin, request, queryset):
    """S5 (issue 16): a message id stored before ids were full-matched on the way in (one with
    '/', a newline, a lone surrogate…) broke the pages that link to it. Each selected message
    whose id fails the pattern gets `r_<16 hex>` (from its profile and old id, so the same on
    every run), its highlights and experience sources follow, and the old id is kept in
    legacy_extra["original_mid"]."""
    repaired = 0
    for message in queryset.only("pk", "profile_id", "mid", "legacy_extra"):
        if OBJECT_ID_RE.fullmatch(message.mid):
            continue
        old = message.mid
        digest = hashlib.sha256(f"{message.profile_id}|{old}".encode("utf-8", "surrogatepass")).hexdigest()
        new = f"r_{digest[:16]}"
        with transaction.atomic():
            extra = dict(message.legacy_extra or {})
            extra.setdefault("original_mid", old)
            Message.objects.filter(pk=message.pk).update(mid=new, legacy_extra=extra)
            Highlight.objects.filter(profile_id=message.profile_id, mid=old).update(mid=new)
            ExperienceSource.objects.filter(experience__profile_id=message.profile_id, mid=old).update(mid=new)
        repaired += 1
    modeladmin.message_user(
        request, gettext("Repaired %(count)d message id(s).") % {"count": repaired}, messages.SUCCESS
    )
