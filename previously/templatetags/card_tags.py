"""Template filters of the card's pages: a card update's summary in the person's language."""

from django import template

from previously.pages.card_display import run_summary as summary_of

register = template.Library()


@register.filter
def run_summary(run) -> str:
    return summary_of(run)
