"""Approximate token counting for the context budget (SPEC R4).

No tokenizer of any particular model is assumed: a CJK character counts as one token
(close to what common BPE vocabularies spend on Chinese), any other text as its UTF-8
bytes / 4, rounded up. Good enough to keep the prompt inside a configured budget.
"""

import math
import re

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")


def approx_tokens(text: str) -> int:
    """Approximate tokens: CJK characters 1 each, everything else UTF-8 bytes / 4."""
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub("", text)
    return cjk + math.ceil(len(rest.encode("utf-8")) / 4)
