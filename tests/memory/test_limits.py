"""SPEC S6: one home for stored texts' limits; a refusal names the limit and its setting."""

import pytest
from django.utils import translation

from memory import limits


def test_a_text_at_the_limit_passes_and_one_over_is_refused_naming_limit_and_setting(settings):
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 2048
    limits.MESSAGE.check("字" * 2048)
    with pytest.raises(limits.TextTooLong) as refused:
        limits.MESSAGE.check("😀" * 2049, record="c_0123456789abcdef")
    message = str(refused.value)
    assert "c_0123456789abcdef" in message
    assert "2049" in message and "2048" in message
    assert "PREVIOUSLY_MAX_MESSAGE_CHARS" in message


def test_the_refusal_is_in_the_active_language(settings):
    settings.PREVIOUSLY_MAX_PERSONA_CHARS = 256
    with translation.override("zh-hans"), pytest.raises(limits.TextTooLong) as refused:
        limits.PERSONA.check("x" * 300)
    assert "PREVIOUSLY_MAX_PERSONA_CHARS" in str(refused.value)
    assert "字符" in str(refused.value)
