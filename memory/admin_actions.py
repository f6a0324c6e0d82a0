"""Admin actions for review (C3) and soft-delete cleanup (D4); they call the same domain verbs."""

from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory.deletion import keep_records, message_refs, purge_records, restore_records
from memory.models import ExperienceHistory, Message


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
