"""Tokenisers: the SPEC R1 baseline and the analyser the recall index is built with.

`tokenize_r1` is SPEC R1 exactly (CJK bigrams, lowercase Latin words) and stays
measurable. `tokenize` is the index contract: R1 tokens, then English stop words
removed and Snowball-stemmed, hyphenated words also joined, and a few Chinese
question/function bigrams dropped. Index and query must use the same `tokenize`;
changing it means bumping ANALYSER_VERSION and rebuilding the index.
"""

import re
import unicodedata
from functools import lru_cache
from operator import add

import snowballstemmer  # uses PyStemmer's C implementation when it is installed

ANALYSER_VERSION = 1

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
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_HYPHENATED = re.compile(r"\b[A-Za-z]+(?:-[A-Za-z]+)+\b")

# NLTK's English stop list (179 words, nltk_data corpora/stopwords/english), vendored so
# nothing is downloaded at run time. It reproduces BENCH.md's BM25 row; larger lists
# (scikit-learn's) drop content words such as "first", "last", "move" and cost recall.
ENGLISH_STOP_WORDS = frozenset(
    """
i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its
itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so
than too very s t can will just don don't should should've now d ll m o re ve
y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't
shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't
""".split()
)
# Chinese question/function bigrams that carry no topic.
CJK_STOP_BIGRAMS = frozenset(
    "什么 怎么 为什 么时 时候 哪里 哪些 我们 你们 他们 她们 一个 这个 那个 "
    "没有 就是 还是 可以 是不 不是 有没 的时 了吗 了什 去了 是什".split()
)

_STEMMER = snowballstemmer.stemmer("english")


def tokenize_r1(text: str) -> list[str]:
    """SPEC R1 tokens in order: each CJK run as overlapping bigrams (a lone character as
    itself), each run of other letters/digits as one lowercase word; emoji and punctuation split."""
    tokens: list[str] = []
    for cjk, word in _RUN.findall(unicodedata.normalize("NFKC", text)):
        if cjk:
            if len(cjk) == 1:
                tokens.append(cjk)
            else:
                tokens += map(add, cjk, cjk[1:])  # the overlapping bigrams, built in C
        else:
            tokens.append(word.lower())
    return tokens


# Longer "words" (pasted hashes, "okokok…") are cut so a term always fits the term table.
MAX_TERM_LENGTH = 48


@lru_cache(maxsize=100_000)
def _analyse(token: str) -> str | None:
    token = token[:MAX_TERM_LENGTH]
    if _CJK_CHAR.match(token):
        return None if token in CJK_STOP_BIGRAMS else token
    if token in ENGLISH_STOP_WORDS:
        return None
    return _STEMMER.stemWord(token) if token.isalpha() else token


def is_cjk_character(token: str) -> bool:
    """A single CJK character (a lone-character token, which the index holds only in bigrams)."""
    return len(token) == 1 and bool(_CJK_CHAR.match(token))


def tokenize(text: str) -> list[str]:
    """The recall analyser (index and query side): R1 tokens without stop words, stemmed."""
    if "-" in text:
        # "de-stress" is also indexed as "destress", so either spelling finds it.
        text = _HYPHENATED.sub(lambda m: m.group(0) + " " + m.group(0).replace("-", ""), text)
    return [a for a in map(_analyse, tokenize_r1(text)) if a is not None]
