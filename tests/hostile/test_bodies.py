"""S4, issue 16 point 1: request bodies are bounded before anything parses them. Against a
real `previously.server` (the Daphne `make run` and `make scale` start) on loopback: a 200 MB
multipart POST to /login/, the same without a declared length (chunked), a 2-million-key form,
and a form with many keys under the size limit leave the server's memory within 50 MB of where
it was and other requests answering. The figures are printed (`make hostile` shows them)."""

import pytest
from django.test import override_settings

from previously.server import ENVELOPE_BYTES, body_limit
from tests.hostile.server import Probe, get, rss_bytes, send_body, start

MB = 1024 * 1024
MEMORY_SLACK = 50 * MB


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    stack = start(tmp_path_factory.mktemp("hostile-bodies"))
    port, pid = stack.ports[0], stack.procs[0].pid
    for _ in range(5):  # warm: templates, translations, the first sessions
        assert get(port, "/login/")[0] == 200
    yield port, pid
    stack.stop()


def _attack(server, label, send):
    port, pid = server
    before = rss_bytes(pid)
    with Probe(port, pid) as probe:
        status = send(port)
    after = rss_bytes(pid)
    print(f"\n[hostile] {label}: answered {status}; RSS {before / MB:.0f} MB -> peak "
          f"{probe.peak_rss / MB:.0f} MB -> {after / MB:.0f} MB; other requests: {probe.summary()}")
    assert probe.peak_rss - before < MEMORY_SLACK, label
    assert set(probe.statuses) <= {200}, probe.statuses
    assert get(port, "/login/")[0] == 200
    return status


def _zeros(total, size=MB):
    chunk = b"\0" * size
    for _ in range(total // size):
        yield chunk


def test_a_200_mb_multipart_post_to_login_is_refused_before_it_is_read(server):
    headers = {"Content-Type": "multipart/form-data; boundary=xx", "Content-Length": str(200 * MB)}
    status = _attack(server, "200 MB multipart POST /login/",
                     lambda port: send_body(port, "/login/", headers, _zeros(200 * MB)))
    assert status == 413


def test_a_200_mb_chunked_post_without_a_length_is_cut_off_at_the_limit(server):
    headers = {"Content-Type": "multipart/form-data; boundary=xx"}
    status = _attack(server, "200 MB chunked POST /login/ (no length)",
                     lambda port: send_body(port, "/login/", headers, _zeros(200 * MB), chunked=True))
    assert status == 413


def test_a_2_million_key_form_is_refused(server):
    body = b"&".join(b"k%d=v" % i for i in range(2_000_000))
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(len(body))}
    status = _attack(server, f"2,000,000-key form ({len(body) / MB:.0f} MB) POST /login/",
                     lambda port: send_body(port, "/login/", headers, [body]))
    assert status == 413


def test_a_form_under_the_size_limit_with_too_many_keys_gets_djangos_refusal(server):
    body = b"&".join(b"k%d=" % i for i in range(250_000))[: 2 * MB]
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(len(body))}
    status = _attack(server, f"250,000-key form ({len(body) / MB:.1f} MB) POST /login/",
                     lambda port: send_body(port, "/login/", headers, [body]))
    assert status in (400, 403)  # CSRF (no cookie) or DATA_UPLOAD_MAX_NUMBER_FIELDS: refused, not parsed here


def test_the_upload_routes_take_their_own_limits_and_everything_else_the_form_limit():
    with override_settings(PREVIOUSLY_MAX_IMPORT_BYTES=7 * MB, PREVIOUSLY_IMAGE_MAX_BYTES=3 * MB,
                           DATA_UPLOAD_MAX_MEMORY_SIZE=MB, FILE_UPLOAD_MAX_MEMORY_SIZE=MB // 2):
        assert body_limit(b"/data/import/") == 7 * MB + ENVELOPE_BYTES
        assert body_limit(b"/chat/image/?x=1") == 3 * MB + ENVELOPE_BYTES
        assert body_limit(b"/login/") == MB + ENVELOPE_BYTES
        assert body_limit(b"/data/import/apply/") == MB + ENVELOPE_BYTES
        assert body_limit(b"/no/such/page/") == MB + ENVELOPE_BYTES


def test_an_upload_route_takes_a_body_above_the_form_limit_through_a_temp_file(server):
    headers = {"Content-Type": "multipart/form-data; boundary=xx", "Content-Length": str(20 * MB)}
    status = _attack(server, "20 MB multipart POST /data/import/ (anonymous)",
                     lambda port: send_body(port, "/data/import/", headers, _zeros(20 * MB)))
    assert status != 413  # past the server's bound; Django then refuses it (CSRF / login)
