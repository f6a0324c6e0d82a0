"""The import's tokenising in a second process (memory.interop.analyse, BENCH §3): the same
tokens as the recall analyser in this process, and the same index either way."""

import os
import subprocess
import sys
import textwrap
import threading

from memory.interop.analyse import Analyser, analyse_texts
from memory.models import RecallDocument
from memory.recall.tokenize import tokenize
from tests.memory.interop.conftest import mem, msg

TEXTS = ["我上周去了北京", "Caroline went to the LGBTQ support groups!", "", "🐱 de-stress 好开心", "x" * 80]


WORKER = """
import django
django.setup()
from memory.interop.analyse import Analyser, analyse_texts
from memory.recall.tokenize import tokenize
TEXTS = {texts!r}
{body}
print("held")
"""


def in_a_fresh_process(body: str) -> None:
    """Run `body` in a new interpreter: the worker is forked only from a process without other
    Python threads, and earlier tests in this one may have left some (thread pools)."""
    code = WORKER.format(texts=TEXTS, body=textwrap.dedent(body))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "previously.settings"})
    assert done.stdout.strip().endswith("held"), done.stdout + done.stderr


def test_the_worker_gives_the_analysers_tokens_batch_by_batch():
    in_a_fresh_process("""
        batches = [TEXTS, [], TEXTS[::-1]]
        with Analyser() as analyser:
            assert analyser.parallel
            got = list(analyser.analyse(batches))
            assert got == [[tokenize(t) for t in b] for b in batches]
            assert list(analyser.analyse([TEXTS])) == [analyse_texts(TEXTS)]  # a second request
    """)


def test_no_worker_is_forked_beside_other_python_threads():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with Analyser() as analyser:
            assert not analyser.parallel  # forking beside a thread that may hold a lock can deadlock
            assert list(analyser.analyse([TEXTS])) == [analyse_texts(TEXTS)]
    finally:
        stop.set()
        other.join()


def test_without_a_worker_the_texts_are_analysed_here():
    with Analyser(parallel=False) as analyser:
        assert not analyser.parallel
        assert list(analyser.analyse([TEXTS])) == [analyse_texts(TEXTS)]


def test_a_worker_that_died_is_replaced_by_analysing_here():
    in_a_fresh_process("""
        analyser = Analyser()
        analyser._proc.kill()
        analyser._proc.join()
        try:
            assert list(analyser.analyse([TEXTS, TEXTS])) == [analyse_texts(TEXTS)] * 2
            assert not analyser.parallel
        finally:
            analyser.close()
    """)


def test_an_abandoned_request_ends_the_worker_so_no_answer_is_taken_for_the_next():
    in_a_fresh_process("""
        with Analyser() as analyser:
            assert analyser.parallel
            results = analyser.analyse([TEXTS, ["猫"]])
            next(results)
            results.close()
            assert list(analyser.analyse([["猫"]])) == [[["猫"]]]
    """)


def test_the_imports_index_holds_the_analysers_tokens(dump_file, run_import):
    # The import tokenises in the worker; every indexed line must carry tokenize's own tokens.
    t0 = 1_772_323_200_000
    path = dump_file([
        msg("owner", f"c_{i:016x}", "user", text, t0 + i * 60_000) for i, text in enumerate(TEXTS[:2] + TEXTS[3:])
    ] + [mem("mem:owner:1772326800000_ab12cd", "assistant", "好的[[fav:北京]] noted", t0 + 3_600_000)])
    assert run_import(path)[0] == 0
    rows = list(RecallDocument.objects.values_list("message__content", "tokens"))
    assert len(rows) == 5
    assert all(tokens == " ".join(tokenize(content)) for content, tokens in rows)
