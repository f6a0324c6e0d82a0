"""SPEC R1 tokeniser: CJK as two-character windows, other scripts as lowercase words."""

import re
import unicodedata

# Han, kana, hangul and CJK punctuation-free letters; everything else alphanumeric is "Latin" here.
_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # compatibility ideographs
    "\U00020000-\U0002fa1f"  # extensions B-F, compatibility supplement
)
_RUN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")


def tokenize(text: str) -> list[str]:
    """Tokens in order: each CJK run as overlapping bigrams (a lone character as itself),
    each run of other letters/digits as one lowercase word; emoji and punctuation split."""
    tokens: list[str] = []
    for cjk, word in _RUN.findall(unicodedata.normalize("NFKC", text)):
        if cjk:
            if len(cjk) == 1:
                tokens.append(cjk)
            else:
                tokens.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
        else:
            tokens.append(word.lower())
    return tokens
