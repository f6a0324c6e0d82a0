"""Template filters of the card's pages: a card update's summary and its tool answers in the person's language."""

from django import template

from previously.pages.card_display import run_summary as summary_of
from previously.pages.slices.log_lines import tool_answer as answer_of

register = template.Library()


@register.filter
def run_summary(run) -> str:
    return summary_of(run)


@register.filter
def tool_answer(step: dict) -> str:
    return answer_of(step)
