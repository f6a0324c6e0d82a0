"""One factory per model; defaults only for required fields (STYLE 13)."""

import itertools

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from memory import models as m

_counter = itertools.count(1)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-123456")


class ProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Profile

    user = factory.SubFactory(UserFactory)
    key = factory.Sequence(lambda n: f"p{n}")


class SliceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Slice

    profile = factory.SubFactory(ProfileFactory)
    key = factory.Sequence(lambda n: f"2026-01-{1 + n // 1440 % 28:02d}-{n // 60 % 24:02d}{n % 60:02d}")
    started_at = factory.LazyFunction(timezone.now)
    last_message_at = factory.SelfAttribute("started_at")


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Message

    profile = factory.SubFactory(ProfileFactory)
    slice = factory.SubFactory(SliceFactory, profile=factory.SelfAttribute("..profile"))
    mid = factory.Sequence(lambda n: f"c_{n:016x}")
    speaker = m.Message.Speaker.USER
    content = "hello"
    created_at = factory.LazyFunction(timezone.now)


class HighlightFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Highlight

    message = factory.SubFactory(MessageFactory)
    profile = factory.SelfAttribute("message.profile")
    hid = factory.Sequence(lambda n: f"h_{n}")
    mid = factory.SelfAttribute("message.mid")
    content = factory.SelfAttribute("message.content")
    created_at = factory.LazyFunction(timezone.now)


class FavouriteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Favourite

    message = factory.SubFactory(MessageFactory)
    profile = factory.SelfAttribute("message.profile")
    excerpt = factory.SelfAttribute("message.content")


class ExperienceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Experience

    profile = factory.SubFactory(ProfileFactory)
    eid = factory.Sequence(lambda n: f"e_{n}")
    title = "an experience"
    content = "something that happened"
    recorded_at = factory.LazyFunction(timezone.now)


class ExperienceSourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ExperienceSource

    experience = factory.SubFactory(ExperienceFactory)
    message = factory.SubFactory(MessageFactory, profile=factory.SelfAttribute("..experience.profile"))
    mid = factory.SelfAttribute("message.mid")


class ExperienceHistoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ExperienceHistory

    experience = factory.SubFactory(ExperienceFactory)
    actor = m.ExperienceHistory.Actor.USER
    action = "update"


class RelationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Relation

    profile = factory.SubFactory(ProfileFactory)
    rid = factory.Sequence(lambda n: f"r_{n}")
    type = m.Relation.Type.RELATED
    from_highlight = factory.SubFactory(
        HighlightFactory, message__profile=factory.SelfAttribute("...profile")
    )
    to_experience = factory.SubFactory(ExperienceFactory, profile=factory.SelfAttribute("..profile"))
    from_id = factory.SelfAttribute("from_highlight.hid")
    to_id = factory.SelfAttribute("to_experience.eid")
    created_at = factory.LazyFunction(timezone.now)


class TombstoneFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Tombstone

    profile = factory.SubFactory(ProfileFactory)
    kind = m.Tombstone.Kind.MESSAGE
    object_id = factory.Sequence(lambda n: f"c_{n:016x}")
    deleted_at = factory.LazyFunction(timezone.now)


class CardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Card

    profile = factory.SubFactory(ProfileFactory)


class CardSnapshotFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.CardSnapshot

    slice = factory.SubFactory(SliceFactory)
    profile = factory.SelfAttribute("slice.profile")


class EvolutionRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.EvolutionRun

    profile = factory.SubFactory(ProfileFactory)
    trigger = m.EvolutionRun.Trigger.MANUAL


class SliceLogEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.SliceLogEntry

    slice = factory.SubFactory(SliceFactory)
    kind = m.SliceLogEntry.Kind.NOTE


class LegacyFragmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.LegacyFragment

    profile = factory.SubFactory(ProfileFactory)
    key = factory.Sequence(lambda n: f"mem:owner:{1760000000000 + n}_abc{n}")
    role = "user"
    ts = factory.Sequence(lambda n: 1760000000000 + n)
    disposition = m.LegacyFragment.Disposition.OWN
    fingerprint = factory.Sequence(lambda n: f"fp{n}")


class LegacyMetaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.LegacyMeta

    key = factory.Sequence(lambda n: f"meta_thing{n}")


class RecallDocumentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.RecallDocument

    message = factory.SubFactory(MessageFactory)
    profile = factory.SelfAttribute("message.profile")
    tokens = "hello"
    pos = factory.Sequence(lambda n: n)
    slice = factory.SelfAttribute("message.slice")
    speaker = m.Message.Speaker.USER


class RecallTermFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.RecallTerm

    profile = factory.SubFactory(ProfileFactory)
    term = "hello"
    df = 1


class RecallStatsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.RecallStats

    profile = factory.SubFactory(ProfileFactory)


class ProactiveSendFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ProactiveSend

    profile = factory.SubFactory(ProfileFactory)
    day = factory.LazyFunction(lambda: timezone.now().date())
    reason = m.ProactiveSend.Reason.HORIZON_DUE
    subject = factory.Sequence(lambda n: f"horizon:2026-01-01:{n}")


class CompanionCardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.CompanionCard

    profile = factory.SubFactory(ProfileFactory)
    identity = factory.Sequence(lambda n: f"{n:064x}")
    spec = "chara_card_v2"
    imported_at = factory.LazyFunction(timezone.now)


class LoreEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.LoreEntry

    profile = factory.SubFactory(ProfileFactory)
    position = factory.Sequence(lambda n: n)
    content = "A note of the card."


class CatchUpFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.CatchUp

    profile = factory.SubFactory(ProfileFactory)
