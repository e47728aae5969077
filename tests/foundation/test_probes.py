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
    assert resp.json() == {"ready": False, "broker": "unavailable"}  # not where it lives: no host, no port
    assert "127.0.0.1" not in resp.content.decode()


def test_other_paths_still_get_the_host_check(production_like):
    assert production_like.get("/login/").status_code == 400


@pytest.mark.django_db
def test_readyz_names_a_dead_database_but_not_its_host_or_port(production_like, monkeypatch):
    from django.db import OperationalError, connection

    def refuse():
        raise OperationalError('connection to server at "db.internal" (10.1.2.3), port 5432 failed')

    monkeypatch.setattr(connection, "cursor", refuse)
    resp = production_like.get("/readyz")
    assert resp.status_code == 503 and resp.json() == {"ready": False, "database": "unavailable"}
    assert "10.1.2.3" not in resp.content.decode() and "5432" not in resp.content.decode()
