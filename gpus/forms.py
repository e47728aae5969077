from dataclasses import dataclass

from django import forms
from django.utils.translation import gettext_lazy as _

from .models import RunStatus
from .procedures import registry


class WizardForm(forms.Form):
    """A procedure's parameters: the node when it needs one, then the fields its
    definition declares. ``eligible`` is the set of node names it applies to (None: no
    node needed, or no restriction)."""

    node = forms.CharField(required=False, label=_("Node"))

    def __init__(self, proc, *args, eligible=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.proc = proc
        self.eligible = eligible
        for p in proc.params:
            self.fields[p.name] = p.field()
        proc.bind_fields(self.fields, str((self.data if self.is_bound else self.initial).get("node") or ""))

    @property
    def pick_fields(self):
        """The bound fields the pick page asks for (not the plan page's confirmations)."""
        return [self[p.name] for p in self.proc.pick_params]

    def clean(self):
        data = super().clean()
        if self.proc.needs_node:
            if not data.get("node"):
                self.add_error("node", _("Choose a node."))
            elif self.eligible is not None and data["node"] not in self.eligible:
                self.add_error("node", _("This procedure does not apply to that node."))
        return data

    def params(self):
        d = self.cleaned_data
        return {p.name: (_confirmation(d.get(p.name)) if p.confirm else d[p.name]) for p in self.proc.params}

    def confirmations(self, checks) -> list["Confirmation"]:
        """The plan page's checkboxes: each "always" confirmation, and each "ack" one a
        pre-check asks for (with the check's own text and the count it names)."""
        out = []
        for p in self.proc.confirm_params:
            asking = [c for c in checks if c.asks_for(p.name)]
            if p.confirm == "always" or asking:
                field = self[p.name]
                label = next((c.ack_label for c in asking if c.ack_label), "") or field.label
                count = max((c.ack_count for c in asking), default=0)
                out.append(
                    Confirmation(p.name, field.html_name, label, str(count) if count else "on", [c for c in asking], p)
                )
        return out

    def missing_confirmations(self, checks) -> list[str]:
        """Why the run cannot start yet: a plan-page confirmation left unticked, or one
        naming fewer GPU pods than the pre-check now finds."""
        params = self.params()
        return [
            str(c.param.refusal)
            for c in self.confirmations(checks)
            if not params.get(c.name) or not all(k.acknowledged(params.get(c.name)) for k in c.checks)
        ]


def _confirmation(value):
    """A ticked checkbox is True; one carrying a count (GPU pods to evict) keeps the number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else bool(value)


@dataclass
class Confirmation:
    name: str
    html_name: str
    label: str
    value: str  # what the checkbox sends ("on", or the count it acknowledges)
    checks: list
    param: object


class RunFilterForm(forms.Form):
    procedure = forms.ChoiceField(
        required=False, choices=lambda: [("", _("All"))] + registry.choices(), label=_("Procedure")
    )
    status = forms.ChoiceField(required=False, choices=[("", _("All"))] + list(RunStatus.choices), label=_("Status"))
    node = forms.CharField(required=False, label=_("Node"))
    actor = forms.CharField(required=False, label=_("By"))


class ManifestForm(forms.Form):
    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 30, "spellcheck": "false", "class": "code"}),
        label=_("brick-nvidia-device-plugin.yaml"),
    )
    note = forms.CharField(required=False, max_length=300, label=_("What changed"))
