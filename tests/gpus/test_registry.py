"""A procedure is data end to end: one registered in this test process only is offered on
the pick page, planned on the plan page, run by the engine and listed by the terminal,
without any other file knowing about it."""

import re
from pathlib import Path

import pytest
from django import forms
from django.core.management import call_command
from django.urls import reverse

from gpus.models import ProcedureRun
from gpus.procedures import engine, registry
from gpus.procedures.base import Check, Outcome, Param, ProcedureDef, Step

pytestmark = pytest.mark.usefixtures("fast_engine")

TOUCHED = "example.com/touched"


class PaintLabel(Step):
    key = "paint"

    def __init__(self, colour):
        self.colour = colour

    def title(self, run):
        return f"1. Paint {run.node} {self.colour}"

    def kubectl(self, run):
        return f"kubectl label node {run.node} {TOUCHED}={self.colour} --overwrite"

    def ensure(self, ctx):
        ctx.gateway.label_node(ctx.node, {TOUCHED: self.colour})
        return Outcome({"metadata": {"labels": {TOUCHED: self.colour}}}, "labelled")

    def verify(self, ctx):
        value = (ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}).get(TOUCHED)
        return Check(value == self.colour, f"{TOUCHED}={value}")


class ProcedureZ(ProcedureDef):
    code = "Z"
    label = "Z. Paint a node"
    description = "A throw-away procedure that labels a node."
    action_label = "Paint (Z)"
    params = (Param("colour", lambda: forms.ChoiceField(choices=[("blue", "blue"), ("red", "red")], label="Colour")),)

    def steps(self, params):
        return [PaintLabel(params.get("colour", "blue"))]

    def eligibility(self, n):
        return "" if n.mode == "exclusive" else "only exclusive nodes"

    def offered_on(self, n):
        return n.mode == "exclusive"


@pytest.fixture
def procedure_z(monkeypatch):
    proc = ProcedureZ()
    monkeypatch.setitem(registry.PROCEDURES, proc.code, proc)
    return proc


def test_throwaway_procedure_is_offered_planned_run_and_listed(twin, procedure_z, admin_client, capsys):
    index = admin_client.get(reverse("procedure_index")).content.decode()
    assert "Z. Paint a node" in index and "A throw-away procedure" in index

    pick = admin_client.get(reverse("wizard_pick", args=["Z"]))
    html = pick.content.decode()
    assert pick.status_code == 200
    assert re.search(r'value="dev-a1-ws04"(?![^>]*disabled)', html), "an exclusive node is offered"
    assert 'name="colour"' in html

    plan = admin_client.get(reverse("wizard_plan", args=["Z"]), {"node": "dev-a1-ws04", "colour": "red"})
    html = plan.content.decode()
    assert plan.status_code == 200
    assert "1. Paint dev-a1-ws04 red" in html and "kubectl label node dev-a1-ws04 example.com/touched=red" in html
    assert 'name="colour" value="red"' in html

    resp = admin_client.post(reverse("wizard_start", args=["Z"]), {"node": "dev-a1-ws04", "colour": "red"})
    run = ProcedureRun.objects.get()
    assert resp.status_code == 302 and run.procedure == "Z" and run.params == {"colour": "red"}
    assert engine.execute(run.pk, twin) == "succeeded"
    assert twin.get_node("dev-a1-ws04")["metadata"]["labels"][TOUCHED] == "red"

    call_command("procedure", "list")
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(f"#{run.pk} "))
    assert " Z dev-a1-ws04 " in line and "succeeded" in line
    detail = admin_client.get(run.get_absolute_url()).content.decode()
    assert "Z. Paint a node" in detail


def test_throwaway_procedure_from_the_terminal_validates_like_the_form(twin, procedure_z, capsys):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--colour"):
        call_command("procedure", "run", "Z", "--node", "dev-a1-ws04", "--inline")
    call_command("procedure", "run", "Z", "--node", "dev-a1-ws04", "--colour", "blue", "--inline")
    assert ProcedureRun.objects.get().status == "succeeded"
    assert twin.get_node("dev-a1-ws04")["metadata"]["labels"][TOUCHED] == "blue"


def test_node_page_offers_what_each_procedure_says(twin, procedure_z, admin_client):
    html = admin_client.get(reverse("node_detail", args=["dev-a1-ws04"])).content.decode()
    assert "Paint (Z)" in html and reverse("wizard_pick", args=["Z"]) + "?node=dev-a1-ws04" in html


REPO = Path(__file__).resolve().parents[2]
LETTER_CHECK = re.compile(
    r"""(==|!=)\s*["'][A-Z]["']|["'][A-Z]["']\s*(==|!=)|\bin\s*\(\s*["'][A-Z]["']\s*,"""
    r"""|url\s+["']wizard_pick["']\s+["'][A-Z]["']"""
)


def test_no_module_outside_the_procedures_compares_a_procedure_letter():
    """The benchmarks too: they name the procedures they run (a loop over codes is not a
    check), and ask the definitions what a run ends with."""
    places = [
        p
        for d in ("brickadmin", "gpus", "workspaces", "templates", "bench")
        for p in (REPO / d).rglob("*")
        if p.suffix in (".py", ".html")
        and "procedures" not in p.relative_to(REPO).parts[:2]
        and "migrations" not in p.parts
    ]
    found = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in places
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if LETTER_CHECK.search(line) and not line.lstrip().startswith("for ")
    ]
    assert not found, "\n".join(found)
