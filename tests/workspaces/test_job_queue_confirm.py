"""The Job approval queue asks once before Approve and Reject, in one
sentence naming the Job, and what follows: the node and GPU it takes, or that the owner sees
the reason and the Job cannot be approved afterwards."""

import html
import re

import pytest

from workspaces import jobs as ws_jobs

pytestmark = pytest.mark.django_db


def test_approve_and_reject_of_a_job_ask_once_naming_it(approved, alice, admin_client):
    ws = approved(alice, "team-a")
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="sleep 60", gpu=1)
    page = admin_client.get("/workspaces/approvals/jobs/").content.decode()
    asks = [html.unescape(a) for a in re.findall(r'data-confirm="([^"]+)"', page)]
    assert asks == [
        f"Approve Job brick-job-{job.pk}? It is sent to the cluster at once and takes 1 GPU on dev-a1-ws04.",
        f"Reject Job brick-job-{job.pk}? alice sees your reason, and the Job cannot be approved afterwards.",
    ]
