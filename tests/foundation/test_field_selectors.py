"""Field selector strings, read as the API server reads ``?fieldSelector=``.

The tables are ported case by case from k8s.io/apimachinery pkg/fields/selector_test.go; each
test names the upstream test."""

import pytest

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.twin_store import field_selector_matches

# --- k8s.io/apimachinery pkg/fields/selector_test.go: TestSplitTerms -------------------------


@pytest.mark.parametrize(
    "selector, terms",
    [
        # Simple selectors
        ("a", ["a"]),
        ("a=avalue", ["a=avalue"]),
        ("a=avalue,b=bvalue", ["a=avalue", "b=bvalue"]),
        ("a=avalue,b==bvalue,c!=cvalue", ["a=avalue", "b==bvalue", "c!=cvalue"]),
        # Empty terms
        ("", []),
        ("a=a,", ["a=a", ""]),
        (",a=a", ["", "a=a"]),
        # Escaped values
        (r"k=\,,k2=v2", [r"k=\,", "k2=v2"]),  # escaped comma in value
        (r"k=\\,k2=v2", [r"k=\\", "k2=v2"]),  # escaped backslash, unescaped comma
        (r"k=\\\,,k2=v2", [r"k=\\\,", "k2=v2"]),  # escaped backslash and comma
        (r"k=\a\b" + "\\", [r"k=\a\b" + "\\"]),  # non-escape sequences
        ("k=\\", ["k=\\"]),  # orphan backslash
        # Multi-byte
        ("함=수,목=록", ["함=수", "목=록"]),
    ],
)
def test_split_terms(selector, terms):
    assert v.split_field_terms(selector) == terms


# --- k8s.io/apimachinery pkg/fields/selector_test.go: TestSplitTerm ---------------------------


@pytest.mark.parametrize(
    "term, split",
    [
        # Simple terms
        ("a=value", ("a", "=", "value")),
        ("b==value", ("b", "==", "value")),
        ("c!=value", ("c", "!=", "value")),
        # Empty or invalid terms
        ("", None),
        ("a", None),
        # Escaped values
        (r"k=\,", ("k", "=", r"\,")),
        (r"k=\=", ("k", "=", r"\=")),
        (r"k=\\\a\b\=\," + "\\", ("k", "=", r"\\\a\b\=\," + "\\")),
        # Multi-byte
        ("함=수", ("함", "=", "수")),
    ],
)
def test_split_term(term, split):
    assert v.split_field_term(term) == split


# --- k8s.io/apimachinery pkg/fields/selector_test.go: TestEscapeValue --------------------------


@pytest.mark.parametrize(
    "value, escaped",
    [("", ""), ("a", "a"), ("=", r"\="), (",", r"\,"), ("\\", "\\\\"), (r"\=\," + "\\", r"\\\=\\\,\\")],
)
def test_escape_value(value, escaped):
    assert v.escape_field_value(value) == escaped
    assert v.unescape_field_value(escaped) == value


@pytest.mark.parametrize("value", ["\\", "\\\\\\", r"\a"])
def test_an_invalid_escape_sequence_is_refused(value):
    with pytest.raises(v.FieldSelectorError, match="invalid escape sequence"):
        v.unescape_field_value(value)


# --- k8s.io/apimachinery pkg/fields/selector_test.go: TestSelectorParse, TestDeterministicParse -


@pytest.mark.parametrize("selector", ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"])
def test_a_good_selector_reads_back_as_written(selector):
    assert v.field_selector_string(v.parse_field_selector(selector)) == selector


@pytest.mark.parametrize("selector", ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x"])
def test_a_bad_selector_is_refused(selector):
    with pytest.raises(v.FieldSelectorError):
        v.parse_field_selector(selector)


def test_parsing_is_deterministic():
    assert v.parse_field_selector("x=a,a=x") == v.parse_field_selector("a=x,x=a")


# --- k8s.io/apimachinery pkg/fields/selector_test.go: TestSelectorMatches ----------------------
FIELDSET = {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}


@pytest.mark.parametrize(
    "selector, fields, matches",
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),  # in and notin in exactMatch
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("foo=bar", FIELDSET, True),
        ("baz=blah", FIELDSET, True),
        ("foo=bar,baz=blah", FIELDSET, True),
        (r"foo=bar,baz=blah,complex=\=value\\\,\\", FIELDSET, True),
        ("foo=blah", FIELDSET, False),
        ("baz=bar", FIELDSET, False),
        ("foo=bar,foobar=bar,baz=blah", FIELDSET, False),
    ],
)
def test_a_selector_selects_as_the_api_server_does(selector, fields, matches):
    assert v.field_terms_match(fields, v.parse_field_selector(selector)) is matches


def test_the_twin_reads_an_escaped_comma_in_a_value():
    pod = {"metadata": {"name": "a,b", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    assert field_selector_matches(pod, r"metadata.name=a\,b,spec.nodeName=n1")
    assert not field_selector_matches(pod, "metadata.name=a")
    with pytest.raises(v.FieldSelectorError):
        field_selector_matches(pod, "metadata.name=a,b")
