"""Approximate token counting for the context budget (SPEC R4).

No tokenizer of any particular model is assumed: a CJK character or CJK punctuation mark
(，。：（）…) counts as one token (close to what common BPE vocabularies spend on Chinese), any
other text as its UTF-8 bytes / 4, rounded up. Good enough to keep the prompt inside a
configured budget. Small English-first vocabularies spend more on Chinese (SmolLM2: about
1.7 tokens a character, measured by tests/realmodel).
"""

import math
import re

CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]")


def approx_tokens(text: str) -> int:
    """Approximate tokens: CJK characters and punctuation 1 each, everything else UTF-8 bytes / 4."""
    cjk = len(CJK.findall(text))
    rest = CJK.sub("", text)
    return cjk + math.ceil(len(rest.encode("utf-8")) / 4)
