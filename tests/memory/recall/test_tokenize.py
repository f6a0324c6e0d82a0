"""Tokenisers: SPEC R1 baseline and the recall analyser (stop words, stemming)."""

from memory.recall.tokenize import MAX_TERM_LENGTH, tokenize, tokenize_r1


def test_r1_cjk_runs_become_bigrams_and_latin_lowercase_words():
    assert tokenize_r1("我很开心 Hello World") == ["我很", "很开", "开心", "hello", "world"]


def test_r1_a_lone_cjk_character_is_its_own_token():
    assert tokenize_r1("猫 cat") == ["猫", "cat"]


def test_r1_emoji_and_punctuation_split_without_crashing():
    assert tokenize_r1("🐱喵喵!!okay👍🏽") == ["喵喵", "okay"]


def test_r1_mixed_scripts_keep_their_order():
    assert tokenize_r1("下周三交report") == ["下周", "周三", "三交", "report"]


def test_r1_keeps_stop_words_and_whole_words():
    assert tokenize_r1("The kids went running 上周") == ["the", "kids", "went", "running", "上周"]


def test_chinese_is_bigrams():
    assert tokenize("我上周去了北京") == ["我上", "上周", "周去", "了北", "北京"]


def test_chinese_question_bigrams_are_dropped():
    tokens = tokenize("你们什么时候去北京")
    assert "什么" not in tokens and "时候" not in tokens and "北京" in tokens


def test_english_is_stemmed_without_stop_words():
    assert tokenize("Caroline went to the LGBTQ support groups yesterday!") == [
        "carolin", "went", "lgbtq", "support", "group", "yesterday",
    ]


def test_stop_words_and_apostrophe_fragments_are_dropped():
    assert tokenize("I don't think she's there") == ["think"]


def test_stemming_joins_inflections():
    assert tokenize("running runs") == tokenize("run run")


def test_mixed_chinese_and_english():
    assert tokenize("我喜欢Python和机器学习") == ["我喜", "喜欢", "python", "和机", "机器", "器学", "学习"]


def test_emoji_only_gives_no_tokens():
    assert tokenize("🙂👨‍👩‍👧") == []


def test_emoji_split_words():
    assert tokenize("😀🎉 好开心 🎉 so happy!!") == ["好开", "开心", "happi"]


def test_hyphenated_words_are_also_joined():
    assert tokenize("de-stress") == ["de", "stress", "destress"]


def test_full_width_letters_are_folded():
    assert tokenize("ＡＢＣ全角") == ["abc", "全角"]


def test_very_long_words_are_cut_to_the_term_length():
    assert tokenize("ok" * 5000) == ["ok" * (MAX_TERM_LENGTH // 2)]


def test_odd_input_never_crashes():
    for text in ["", "   \n\t", "\x00\ud7ff", "a\u0301", "Ω≈ç√∫", "１２３", "ﾊﾝｶｸ", "한국어 텍스트"]:
        assert isinstance(tokenize(text), list)
