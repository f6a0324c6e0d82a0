"""Why a highlight or favourite was refused (C1), in the interface language: the domain's
reasons (memory.curation) are English sentences for the agent and the logs; the pages say
them by their code."""

from django.utils.translation import gettext_lazy as _

from memory.curation import HighlightRefused

REASONS = {
    "not_found": _("that line is not in this companion's archive"),
    "message_deleted": _("that line was deleted"),
    "empty": _("there are no words to keep"),
    "not_verbatim": _("the text does not occur verbatim in the line; select it exactly"),
}


def refusal(refused: HighlightRefused) -> str:
    return str(REASONS.get(refused.code, refused.reason))
