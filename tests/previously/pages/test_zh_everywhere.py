"""Chinese everywhere (issue 25 point 7, U-series): the texts that stayed English in a Chinese
interface — the slice page's technical log, experience state errors, import error details,
third-party admin pages — read in Chinese, or say in one line that their package has no
translation."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from memory.models import EvolutionRun, SliceLogEntry
from memory.slices import log as slice_log
from previously.agent.analyzer import Verdict, log_request
from previously.agent.events import emit
from previously.agent.evolve import NOTHING_WORTH_KEEPING, create_run, skip_run
from previously.agent.lifecycle import INTERRUPTED
from tests.factories import ExperienceFactory
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db
ZH = {"accept-language": "zh-CN,zh;q=0.9"}
ENGLISH_WORD = re.compile(r"\b[A-Za-z]{3,}\b")


def _section(html: str, heading_id: str) -> str:
    """The text of the <section> labelled by `heading_id`, tags removed."""
    start = html.index(f'aria-labelledby="{heading_id}"')
    body = html[start : html.index("</section>", start)]
    return re.sub(r"<[^>]+>", " ", body.split(">", 1)[1])


def test_the_slice_pages_technical_log_reads_in_chinese(logged_in, profile):
    s = make_slice(profile, lines=[("user", "记住我叫小林"), ("assistant", "好的，小林")])
    log_request(s, Verdict(True, "memory_request", "asked to remember: '记住'", "rules"))
    slice_log(s, SliceLogEntry.Kind.ANALYZER, "turn analyzer model failed (boom); rules: no request",
              event="analyzer_failed", error="超时")
    slice_log(s, SliceLogEntry.Kind.ANALYZER, "no explicit request (model): 闲聊",
              event="turn", source="model", reason="闲聊")
    slice_log(s, SliceLogEntry.Kind.ANALYZER, "worth evolving: 有新名字", event="worth", worth=True,
              failed=False, reason="有新名字")
    slice_log(s, SliceLogEntry.Kind.ANALYZER, "analyzer failed — ran anyway", event="worth", worth=True,
              failed=True, reason="analyzer failed (x)")
    run = create_run(profile=profile, slice_=s, trigger=EvolutionRun.Trigger.SLICE_CLOSE)
    emit(run, "started", trigger=run.trigger)
    skip_run(run, NOTHING_WORTH_KEEPING)
    EvolutionRun.objects.create(profile=profile, slice=s, trigger=EvolutionRun.Trigger.SLICE_CLOSE,
                                status=EvolutionRun.Status.FAILED, error=INTERRUPTED, finished_at=timezone.now())

    html = logged_in.get(reverse("slice", args=[s.key]), headers=ZH).content.decode()

    log, runs = _section(html, "log-h"), _section(html, "runs-h")
    assert "明确的请求：要求记住（由规则发现）" in log
    assert "逐轮分析器的模型失败（超时）" in log and "没有明确的请求（模型）：闲聊" in log
    assert "值得更新卡片：有新名字" in log and "分析器失败；卡片更新仍然运行了。" in log
    assert f"卡片更新 {run.pk} 已开始" in log and f"卡片更新 {run.pk} 已跳过：没有值得记下的内容" in log
    assert "没有值得记下的内容" in runs and "未完成就中断了——卡片未改变" in runs
    assert ENGLISH_WORD.findall(log) == [] and ENGLISH_WORD.findall(runs) == []


def test_the_log_stays_english_in_english(logged_in, profile):
    s = make_slice(profile, lines=[("user", "remember I'm Lin")])
    log_request(s, Verdict(True, "memory_request", "asked to remember: 'remember'", "rules"))
    html = logged_in.get(reverse("slice", args=[s.key]), headers={"accept-language": "en"}).content.decode()
    assert "Explicit request: a request to remember (found by rules)" in _section(html, "log-h")


def test_experience_state_errors_read_in_chinese(logged_in, profile):
    e = ExperienceFactory(profile=profile, title="搬家", status="candidate", invalid_at=timezone.now())
    url = reverse("curation:experience_action", args=[profile.key, e.eid, "confirm"])
    html = logged_in.post(url, headers=ZH, follow=True).content.decode()
    assert f"经历 {e.eid} 已失效，不能再确认。" in html
    assert "cannot be confirmed" not in html


def test_import_error_details_read_in_chinese(logged_in, user):
    upload = SimpleUploadedFile("export.json", b'{"format": "previously", "profiles": [}', "application/json")
    response = logged_in.post(reverse("data_import_preview"), {"export": upload}, headers=ZH)
    html = response.content.decode()
    assert response.status_code == 400
    assert "该文件不是 JSON 导出文件" in html and "停在" in html
    assert "That file" not in html and "it stopped at" not in html


def test_admin_pages_of_untranslated_packages_say_so_in_one_line(admin_client):
    axes = admin_client.get(reverse("admin:axes_accessattempt_changelist"), headers=ZH).content.decode()
    tasks = admin_client.get(reverse("admin:app_list", args=["django_tasks_database"]), headers=ZH).content.decode()
    ours = admin_client.get(reverse("admin:memory_experience_changelist"), headers=ZH).content.decode()
    english = admin_client.get(reverse("admin:axes_accessattempt_changelist"),
                               headers={"accept-language": "en"}).content.decode()
    note = "以下部分的软件包没有这种语言的翻译，因此显示英文："
    assert axes.count(note) == 1 and "Axes" in axes.split(note)[1].split("</li>")[0]
    assert tasks.count(note) == 1 and "Tasks Database Backend" in tasks.split(note)[1].split("</li>")[0]
    assert note not in ours and "Not translated" not in english
