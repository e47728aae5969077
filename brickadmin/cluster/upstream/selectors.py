"""Label selectors: a LabelSelector object (matchLabels, matchExpressions) and a selector string
(`kubectl get -l`, ``?labelSelector=``), with the validation of label keys and values.

Sources: k8s.io/apimachinery pkg/apis/meta/v1/helpers.go (LabelSelectorAsSelector),
pkg/labels/selector.go (its lexer, its recursive descent parser and NewRequirement's
validation) and pkg/api/validate/content (IsLabelKey, IsLabelValue, IsDNS1123Subdomain);
field selector strings are read as pkg/fields/selector.go reads them (splitTerms, splitTerm,
EscapeValue, UnescapeValue, parseSelector). Tests: tests/foundation/test_label_selectors.py
(pkg/labels/selector_test.go) and tests/foundation/test_field_selectors.py
(pkg/fields/selector_test.go).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .names import KubeObject

# --- label selectors -------------------------------------------------------------


def labels_match(labels: dict[str, str], match_labels: KubeObject | None) -> bool:
    """Equality-only selection (nodeSelector, matchLabels); empty selects everything."""
    return all(labels.get(k) == v for k, v in (match_labels or {}).items())


def _expression_matches(labels: dict[str, str], expr: KubeObject) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an operator the API server would have refused


def selector_matches(labels: dict[str, str], selector: KubeObject | None) -> bool:
    """A LabelSelector (``matchLabels`` + ``matchExpressions``, ANDed). An empty selector
    selects everything; callers decide what a missing (null) selector means."""
    selector = selector or {}
    return labels_match(labels, selector.get("matchLabels")) and all(
        _expression_matches(labels, e) for e in selector.get("matchExpressions") or []
    )


def split_selector_terms(selector: str) -> list[str]:
    """Comma-separated terms of a label selector string (commas inside ``(...)`` kept); a field
    selector's terms are ``split_field_terms``'."""
    parts, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


# --- label selector strings ---------------------------------------------------------
# labels.Parse, as `kubectl get -l`, `?labelSelector=` and node selectors read a selector
# string, ported from k8s.io/apimachinery pkg/labels/selector.go (its lexer, its recursive
# descent parser and NewRequirement's validation) with the checks of
# pkg/api/validate/content (IsLabelKey, IsLabelValue, IsDNS1123Subdomain) written without
# regular expressions. Tests: tests/foundation/test_label_selectors.py (selector_test.go).


class SelectorError(ValueError):
    """A selector string labels.Parse refuses; the message is the API server's."""


class Requirement(NamedTuple):
    """One term of a parsed selector: key, operator (In, NotIn, =, ==, !=, Exists,
    DoesNotExist, Gt, Lt) and its values, sorted and without repeats (a sets.String)."""

    key: str
    operator: str
    values: tuple[str, ...]


SELECTOR_OPERATORS = ("in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt")
_BINARY_OPERATORS = ("in", "notin", "=", "==", "!=", "gt", "lt")  # the order of parseOperator's message
# The lexer's tokens: the literal for the fixed ones; identifiers and the end are their own kinds.
_IDENT, _END, _ERROR = "identifier", "end", "error"
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": "gt", "in": "in", "<": "lt", "!=": "!="}
_TOKENS.update({"notin": "notin", "(": "("})
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_LABEL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_ALPHANUMERIC = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_DNS_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_DNS_ALPHANUMERIC = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
LABEL_NAME_MAX_LENGTH = 63  # a label key's name part, and a label value
DNS1123_SUBDOMAIN_MAX = 253
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # quoted in messages only, never matched


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """content.RegexError: the message, its examples and the pattern, as the API server words it."""
    quoted = " or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {quoted}, regex used for validation is '{fmt}')"


def _label_name_ok(name: str) -> bool:
    return bool(name) and set(name) <= _LABEL_NAME_CHARS and name[0] in _ALPHANUMERIC and name[-1] in _ALPHANUMERIC


def dns1123_subdomain_shaped(value: str) -> bool:
    """Dot-separated labels of [a-z0-9-], each starting and ending with [a-z0-9] (length apart)."""
    return all(
        part and set(part) <= _DNS_LABEL_CHARS and part[0] in _DNS_ALPHANUMERIC and part[-1] in _DNS_ALPHANUMERIC
        for part in value.split(".")
    )


def dns1123_subdomain_errors(value: str) -> list[str]:
    """content.IsDNS1123Subdomain: dot-separated labels of [a-z0-9-], each starting and
    ending with [a-z0-9], at most 253 bytes."""
    errs = []
    if len(value.encode()) > DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} bytes")
    if not dns1123_subdomain_shaped(value):
        label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character",
                f"{label}(\\.{label})*",
                "example.com",
            )
        )
    return errs


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: an optional DNS-subdomain prefix and '/', then a name of at most
    63 characters of [A-Za-z0-9-_.] starting and ending with an alphanumeric. [] when valid."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in dns1123_subdomain_errors(prefix)]
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > LABEL_NAME_MAX_LENGTH:
        errs.append(f"name part must be no more than {LABEL_NAME_MAX_LENGTH} bytes")
    if not _label_name_ok(name):
        errs.append("name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue: empty, or at most 63 characters of [A-Za-z0-9-_.] starting and
    ending with an alphanumeric. [] when valid."""
    errs = []
    if len(value.encode()) > LABEL_NAME_MAX_LENGTH:
        errs.append(f"must be no more than {LABEL_NAME_MAX_LENGTH} bytes")
    if value and not _label_name_ok(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                f"({_LABEL_KEY_FMT})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def _go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): an optional sign and ASCII digits within int64, else None."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def new_requirement(key: str, operator: str, values: Sequence[str] = ()) -> Requirement:
    """labels.NewRequirement: the requirement, or SelectorError naming every rule broken."""
    errs = [f"key: Invalid value: {key!r}: {'; '.join(e)}" for e in [label_key_errors(key)] if e]
    vals = list(values)
    if operator in ("in", "notin"):
        if not vals:
            errs.append("values: Invalid value: for 'in', 'notin' operators, values set can't be empty")
    elif operator in ("=", "==", "!="):
        if len(vals) != 1:
            errs.append("values: Invalid value: exact-match compatibility requires one single value")
    elif operator in ("exists", "!"):
        if vals:
            errs.append("values: Invalid value: values set must be empty for exists and does not exist")
    elif operator in ("gt", "lt"):
        if len(vals) != 1:
            errs.append("values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required")
        errs += [
            f"values[{i}]: Invalid value: {v!r}: for 'Gt', 'Lt' operators, the value must be an integer"
            for i, v in enumerate(vals)
            if _go_int64(v) is None
        ]
    else:
        supported = ", ".join(f'"{o}"' for o in SELECTOR_OPERATORS)
        errs.append(f"operator: Unsupported value: {operator!r}: supported values: {supported}")
    errs += [
        f"values[{i}][{key}]: Invalid value: {v!r}: {'; '.join(e)}"
        for i, v in enumerate(vals)
        for e in [label_value_errors(v)]
        if e
    ]
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, operator, tuple(sorted(set(vals))))


def requirement_matches(req: Requirement, labels: dict[str, str]) -> bool:
    """Requirement.Matches."""
    op, present = req.operator, req.key in labels
    if op in ("in", "=", "=="):
        return present and labels[req.key] in req.values
    if op in ("notin", "!="):
        return not present or labels[req.key] not in req.values
    if op == "exists":
        return present
    if op == "!":
        return not present
    if op in ("gt", "lt") and present and len(req.values) == 1:
        have, want = _go_int64(labels[req.key]), _go_int64(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "gt" else have < want
    return False


def requirement_string(req: Requirement) -> str:
    """Requirement.String: ``!key``, ``key``, ``key=v``, ``key in (a,b)``, ``key>1``."""
    if req.operator in ("exists", "!"):
        return ("!" if req.operator == "!" else "") + req.key
    joined = ",".join(req.values)
    if req.operator in ("in", "notin"):
        return f"{req.key} {req.operator} ({joined})"
    return req.key + {"gt": ">", "lt": "<"}.get(req.operator, req.operator) + joined


def selector_string(requirements: Sequence[Requirement]) -> str:
    return ",".join(requirement_string(r) for r in requirements)


def lex_selector(text: str) -> list[tuple[str, str]]:
    """The lexer: (token, literal) pairs up to and including the end. A special symbol runs
    as long as it stays a token ("!=" not "!" "="); anything else up to a special symbol or
    blank is a keyword (in, notin) or an identifier."""
    out: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n or text[pos] == "\0":  # Go's lexer reads a NUL as the end
            out.append((_END, ""))
            return out
        if text[pos] in _SPECIAL:
            buffer, last = "", None
            while pos < n and text[pos] in _SPECIAL:
                if buffer + text[pos] in _TOKENS:
                    buffer += text[pos]
                    last = (_TOKENS[buffer], buffer)
                    pos += 1
                elif last is not None:
                    break
                else:
                    buffer += text[pos]
                    pos += 1
            out.append(last or (_ERROR, f"error expected: keyword found '{buffer}'"))
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE and text[pos] != "\0":
            pos += 1
        word = text[start:pos]
        out.append((word, word) if word in ("in", "notin") else (_IDENT, word))


class _SelectorParser:
    """parse(): the recursive descent over the lexed tokens; "in" and "notin" read as
    identifiers where values are expected ("notin=in" is a key and a value)."""

    def __init__(self, text: str):
        self.items, self.pos = lex_selector(text), 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        return (_IDENT, lit) if values and tok in ("in", "notin") else (tok, lit)

    def consume(self, values: bool = True) -> tuple[str, str]:
        item = self.lookahead(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok == _END:
                return reqs
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            tok, lit = self.consume()
            if tok == _END:
                return reqs
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.lookahead()
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        operator = ""
        tok, lit = self.consume()
        if tok == "!":
            operator = "!"
            tok, lit = self.consume()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        errors = label_key_errors(key)
        if errors:
            raise SelectorError(f"key: Invalid value: {key!r}: {'; '.join(errors)}")
        if operator == "!" or self.lookahead()[0] in (_END, ","):  # "!x=a" fails after, at the "="
            return new_requirement(key, operator or "exists")
        operator = self.operator()
        return new_requirement(key, operator, self.set_values() if operator in ("in", "notin") else self.exact_value())

    def operator(self) -> str:
        tok, lit = self.consume(values=False)
        if tok not in _BINARY_OPERATORS:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return tok

    def set_values(self) -> list[str]:
        tok, lit = self.consume()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == ")":
            self.consume()
            return [""]
        if tok not in (_IDENT, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume()[0] != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            tok, lit = self.consume()
            if tok == _IDENT:
                values.append(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == ")":
                    return values
                if tok2 != ",":
                    raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == ",":
                if not values or self.lookahead()[0] in (")", ","):
                    values.append("")  # "(," ",)" ",," each hold the empty value
                if self.lookahead()[0] == ")":
                    return values
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.lookahead()[0] in (_END, ","):
            return [""]
        tok, lit = self.consume()
        if tok == _IDENT:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_selector_requirements(selector: str | None) -> list[Requirement]:
    """labels.Parse: the requirements, sorted by key (stable), or SelectorError."""
    return sorted(_SelectorParser(selector or "").parse(), key=lambda r: r.key)


def parse_label_selector(selector: str | None) -> KubeObject:
    """A selector string (``a=b,c!=d,e in (f,g),h,!i``) as a LabelSelector dict selecting
    the same (``matchLabels`` for equalities, the rest as ``matchExpressions``), or
    SelectorError for a string labels.Parse refuses, and for Gt and Lt, which a
    LabelSelector cannot hold (metav1.ParseToLabelSelector refuses them too)."""
    match_labels: dict[str, str] = {}
    exprs: list[KubeObject] = []
    names = {"in": "In", "notin": "NotIn", "!=": "NotIn", "exists": "Exists", "!": "DoesNotExist"}
    for req in parse_selector_requirements(selector):
        if req.operator in ("gt", "lt"):
            raise SelectorError(f'"{req.operator}" isn\'t supported in label selectors')
        if req.operator in ("=", "==") and match_labels.get(req.key, req.values[0]) == req.values[0]:
            match_labels[req.key] = req.values[0]
        elif req.operator in ("=", "=="):
            exprs.append({"key": req.key, "operator": "In", "values": list(req.values)})  # a=x,a=y: nothing
        elif req.operator in ("exists", "!"):
            exprs.append({"key": req.key, "operator": names[req.operator]})
        else:
            exprs.append({"key": req.key, "operator": names[req.operator], "values": list(req.values)})
    out: KubeObject = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


def label_selector_matches(labels: dict[str, str], selector: str | None) -> bool:
    """A selector string, as ``list --selector`` applies it (SelectorError when refused)."""
    return all(requirement_matches(r, labels) for r in parse_selector_requirements(selector))


# --- field selector strings -----------------------------------------------------------
# fields.ParseSelector, as ``?fieldSelector=`` and ``kubectl get --field-selector`` read a
# field selector string: k8s.io/apimachinery pkg/fields/selector.go.


class FieldSelectorError(ValueError):
    """A field selector string fields.ParseSelector refuses; the message is the API server's."""


class FieldTerm(NamedTuple):
    """One term of a field selector: field, operator (=, == or !=), the value unescaped."""

    field: str
    operator: str
    value: str


_FIELD_OPERATORS = ("!=", "==", "=")  # "==" before "=", so no "=" is left on the value


def split_field_terms(selector: str) -> list[str]:
    """splitTerms: the terms between commas, a comma after a backslash kept in its term."""
    if not selector:
        return []
    terms, start, in_slash = [], 0, False
    for i, ch in enumerate(selector):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


def split_field_term(term: str) -> tuple[str, str, str] | None:
    """splitTerm: (field, operator, literal value) at the first operator, or None. The field
    has no escapes, so the first operator found splits."""
    for i in range(len(term)):
        for op in _FIELD_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def escape_field_value(value: str) -> str:
    """EscapeValue: a backslash, comma or equals sign in a value behind a backslash."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(value: str) -> str:
    """UnescapeValue: \\\\, \\, and \\= read as the character; any other escape, an orphan
    backslash, or a bare , or = is refused."""
    out, in_slash = [], False
    for ch in value:
        if in_slash:
            if ch not in "\\,=":
                raise FieldSelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise FieldSelectorError(f"invalid field selector: unescaped character: {ch}")
        else:
            out.append(ch)
    if in_slash:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(selector: str | None) -> list[FieldTerm]:
    """parseSelector: the terms sorted as strings, empty ones skipped; FieldSelectorError for
    a term with no operator or a value badly escaped."""
    terms = []
    for part in sorted(split_field_terms(selector or "")):
        if not part:
            continue
        split = split_field_term(part)
        if split is None:
            raise FieldSelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
        field, op, literal = split
        terms.append(FieldTerm(field, op, unescape_field_value(literal)))
    return terms


def field_selector_string(terms: Sequence[FieldTerm]) -> str:
    """Selector.String(): each term as field=value or field!=value, its value escaped."""
    return ",".join(f"{t.field}{'!=' if t.operator == '!=' else '='}{escape_field_value(t.value)}" for t in terms)


def field_terms_match(fields: dict[str, str], terms: Sequence[FieldTerm]) -> bool:
    """hasTerm and notHasTerm against a fields.Set: a field not set reads as ""."""
    return all((fields.get(t.field, "") == t.value) != (t.operator == "!=") for t in terms)
