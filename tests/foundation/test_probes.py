"""The kubelet's probes: answered over plain HTTP to the pod's IP, whatever the host
and https settings, without a login; readiness says what is not there."""
import pytest
from django.test import Client


@pytest.fixture
def production_like(settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["brick.example.org"]
    settings.SECURE_SSL_REDIRECT = True
    return Client(HTTP_HOST="10.0.0.7:8000")  # the pod IP, as the kubelet sends it


def test_healthz_answers_before_host_and_https_checks(production_like):
    resp = production_like.get("/healthz")
    assert resp.status_code == 200 and resp.content == b"ok"


@pytest.mark.django_db
def test_readyz_checks_the_database(production_like):
    resp = production_like.get("/readyz")
    assert resp.status_code == 200 and resp.json()["ready"] is True


@pytest.mark.django_db
def test_readyz_says_what_is_missing(production_like, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    resp = production_like.get("/readyz")
    assert resp.status_code == 503 and resp.json()["ready"] is False and "broker" in resp.json()


def test_other_paths_still_get_the_host_check(production_like):
    assert production_like.get("/login/").status_code == 400
