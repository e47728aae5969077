"""Run and step states carry their badge colour; the old map's colours are unchanged."""

import pytest

from brickadmin.choices import TaggedChoices
from gpus.models import ProcedureRun, RunStatus, StepRun, StepState

# The colours the templates showed before the states carried them.
EXPECTED = {
    "pending": "",
    "running": "warn",
    "succeeded": "ok",
    "failed": "bad",
    "cancelled": "warn",
    "interrupted": "bad",
    "skipped": "",
}


@pytest.mark.parametrize("choices", [RunStatus, StepState])
def test_every_state_has_its_colour(choices):
    assert {m.value: m.tag for m in choices} == {v: EXPECTED[v] for v in choices.values}


def test_values_and_labels_are_plain_text_choices():
    assert RunStatus.choices[:2] == [("pending", "Pending"), ("running", "Running")]
    assert RunStatus.RUNNING == "running" and RunStatus("failed") is RunStatus.FAILED
    assert StepState.SKIPPED.label == "Skipped"


def test_models_read_the_tag_from_the_choice():
    assert ProcedureRun(status="interrupted").status_tag == "bad"
    assert StepRun(state="skipped").state_tag == ""
    assert StepRun(state="cancelled").state_tag == "warn"
    assert ProcedureRun(status="no-such-state").status_tag == ""


def test_an_unknown_colour_is_refused():
    with pytest.raises(ValueError):

        class Bad(TaggedChoices):
            X = "x", "purple", "X"


def test_the_run_list_marks_rows_by_the_states_colour():
    """The list's warning rows are the states whose badge is "bad" (no second map in the template)."""
    import re

    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from gpus.views.runs import RUN_TABLE

    runs = [
        ProcedureRun(pk=i, procedure="C", node="", status=s, actor_name="root")
        for i, s in enumerate(RunStatus.values, 1)
    ]
    html = render_to_string(
        "gpus/runs/_rows.html",
        {"runs": runs, "table": RUN_TABLE.unsorted()},
        request=RequestFactory().get("/procedures/"),
    )
    warned = re.findall(r'<tr class="row-warn">\s*<td[^>]*><a href="[^"]*">#(\d+)</a>', html)
    assert [RunStatus.values[int(n) - 1] for n in warned] == ["failed", "interrupted"]
