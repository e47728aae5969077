"""Texts the product words for a page (a plan's acknowledgement, a finding's explanation) and
texts a run records (why it fell back from Prometheus) read in Korean for a Korean reader,
with no English left, whatever language the run was started in."""

import pytest
from django.urls import reverse
from django.utils import translation

from gpus.models import ProcedureRun
from gpus.procedures import service
from gpus.tasks import execute_run

from .test_step_language import page_in

pytestmark = pytest.mark.usefixtures("fast_engine")


def test_a_run_started_in_english_says_prometheus_is_not_configured_in_korean(twin, admin_client, settings):
    settings.PROMETHEUS_URL = ""
    with translation.override("en"):
        run = service.start_run("C", "", {"replicas": 3}, actor_name="root", dispatch=False)
        execute_run(run.pk)
    assert ProcedureRun.objects.get(pk=run.pk).status == "succeeded"
    korean = page_in(admin_client, reverse("run_detail", args=[run.pk]), "ko")
    assert "Prometheus가 설정되지 않았습니다" in korean and "Prometheus is not configured" not in korean
    english = page_in(admin_client, reverse("run_detail", args=[run.pk]), "en")
    assert "Prometheus is not configured" in english


def test_the_plans_acknowledgement_reads_in_korean(twin, admin_client):
    # the seed's only exclusive node holds its whole exclusive quota: converting it leaves quota over
    korean = page_in(admin_client, reverse("wizard_plan", args=["A"]) + "?node=dev-a1-ws04", "ko")
    assert "할당된 쿼터 중 GPU 1개가 전체를 넘는다는 것을 이해합니다." in korean
    assert "I understand" not in korean and "over the Total" not in korean


def test_the_mig_single_finding_is_explained_in_korean(twin, admin_client):
    korean = page_in(admin_client, reverse("help"), "ko")
    assert "디바이스 플러그인이 거부하는 MIG 레이아웃" in korean
    assert "MIG layout the device plugin refuses" not in korean and "MIG strategy single every GPU" not in korean
