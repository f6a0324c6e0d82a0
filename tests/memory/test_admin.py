"""Every model has an admin whose list, filtered list and change pages render (O1)."""

import pytest
from django.contrib import admin
from django.urls import reverse

from memory import models as m
from tests import factories as f
from tests.csp import assert_csp_clean

MODELS_AND_FACTORIES = [
    (m.Profile, f.ProfileFactory),
    (m.Slice, f.SliceFactory),
    (m.SliceLogEntry, f.SliceLogEntryFactory),
    (m.Message, f.MessageFactory),
    (m.Highlight, f.HighlightFactory),
    (m.Favourite, f.FavouriteFactory),
    (m.Experience, f.ExperienceFactory),
    (m.ExperienceHistory, f.ExperienceHistoryFactory),
    (m.Relation, f.RelationFactory),
    (m.Tombstone, f.TombstoneFactory),
    (m.Card, f.CardFactory),
    (m.CardSnapshot, f.CardSnapshotFactory),
    (m.EvolutionRun, f.EvolutionRunFactory),
    (m.LegacyFragment, f.LegacyFragmentFactory),
    (m.LegacyMeta, f.LegacyMetaFactory),
    (m.RecallDocument, f.RecallDocumentFactory),
    (m.RecallTerm, f.RecallTermFactory),
    (m.RecallStats, f.RecallStatsFactory),
    (m.ProactiveSend, f.ProactiveSendFactory),
    (m.CompanionCard, f.CompanionCardFactory),
    (m.LoreEntry, f.LoreEntryFactory),
    (m.CatchUp, f.CatchUpFactory),
]


def test_every_memory_model_is_registered():
    from django.apps import apps

    registered = {model for model in admin.site._registry}
    memory_models = set(apps.get_app_config("memory").get_models()) - {m.ExperienceSource}
    assert memory_models <= registered


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "factory"), MODELS_AND_FACTORIES, ids=lambda v: getattr(v, "__name__", ""))
def test_admin_list_and_change_pages_render(admin_client, model, factory):
    obj = factory()
    opts = model._meta
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    assert admin_client.get(changelist).status_code == 200
    assert admin_client.get(changelist, {"q": "你好 🐱"}).status_code == 200
    change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    assert admin_client.get(change).status_code == 200


@pytest.mark.django_db
def test_admin_message_list_filters_by_deleted(admin_client):
    live = f.MessageFactory(content="still here")
    f.MessageFactory(content="gone away", deleted_at="2026-01-01T00:00Z")
    url = reverse("admin:memory_message_changelist")
    body = admin_client.get(url, {"deleted": "live"}).content.decode()
    assert live.content in body and "gone away" not in body


@pytest.mark.django_db
def test_admin_is_refused_to_non_staff(client, user):
    client.force_login(user)
    response = client.get(reverse("admin:memory_message_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response.url


@pytest.mark.django_db
def test_a_runs_diff_is_rendered_read_only_beside_the_card_before_and_after_o1(admin_client):
    run = f.EvolutionRunFactory(
        status="changed",
        card_before="## Now\n- Lives in Berlin <b>",
        card_after="## Now\n- Lives in Lisbon 🇵🇹",
        diff="--- before\n+++ after\n@@ -1,2 +1,2 @@\n ## Now\n-- Lives in Berlin <b>\n+- Lives in Lisbon 🇵🇹",
    )
    snapshot = f.CardSnapshotFactory(run=run, profile=run.profile)

    page = admin_client.get(reverse("admin:memory_evolutionrun_change", args=[run.pk]))
    html = page.content.decode()

    assert page.status_code == 200
    assert '<span class="diff-add">+- Lives in Lisbon 🇵🇹</span>' in html
    assert '<span class="diff-del">-- Lives in Berlin &lt;b&gt;</span>' in html
    assert 'name="diff"' not in html and 'name="card_before"' not in html and 'name="card_after"' not in html
    assert html.index("Lives in Berlin &lt;b&gt;</div>") < html.index("diff-rendered") < html.index("Lives in Lisbon 🇵🇹</div>")
    assert "previously/admin-diff.css" in html
    assert_csp_clean(page)
    snap_html = admin_client.get(reverse("admin:memory_cardsnapshot_change", args=[snapshot.pk])).content.decode()
    assert '<span class="diff-add">+- Lives in Lisbon 🇵🇹</span>' in snap_html
