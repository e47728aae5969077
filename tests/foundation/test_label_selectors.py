"""Label selector strings and tolerations, as Kubernetes decides them.

The tables are ported case by case from k8s.io/apimachinery pkg/labels/selector_test.go
and k8s.io/api core/v1/toleration_test.go (v0.34); each test names the upstream test."""

import pytest

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.vocabulary import Requirement, SelectorError


def parse(text):
    return v.parse_selector_requirements(text)


def req(key, op, *values):
    return v.new_requirement(key, op, values)


# --- TestSelectorParse --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]
)
def test_a_good_selector_reads_back_as_written_without_blanks(text):
    assert v.selector_string(parse(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_a_bad_selector_is_refused(text):
    with pytest.raises(SelectorError):
        parse(text)


def test_parsing_is_deterministic():  # TestDeterministicParse
    assert v.selector_string(parse("x=a,a=x")) == v.selector_string(parse("a=x,x=a"))


# --- TestSelectorMatches ------------------------------------------------------------------

LABELSET = {"foo": "bar", "baz": "blah"}


@pytest.mark.parametrize(
    "selector, labels, matches",
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),  # in and notin in exactMatch
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("foo=bar", LABELSET, True),
        ("baz=blah", LABELSET, True),
        ("foo=bar,baz=blah", LABELSET, True),
        ("foo=blah", LABELSET, False),
        ("baz=bar", LABELSET, False),
        ("foo=bar,foobar=bar,baz=blah", LABELSET, False),
    ],
)
def test_a_selector_string_selects_as_the_api_server_does(selector, labels, matches):
    assert v.label_selector_matches(labels, selector) is matches
    if ">" not in selector and "<" not in selector:  # the LabelSelector form selects the same
        assert v.selector_matches(labels, v.parse_label_selector(selector)) is matches
    else:  # which cannot hold Gt and Lt
        with pytest.raises(SelectorError):
            v.parse_label_selector(selector)


# --- TestLexer, TestLexerSequence, TestParserLookahead ------------------------------------


@pytest.mark.parametrize(
    "text, token",
    [
        ("", "end"),
        (",", ","),
        ("notin", "notin"),
        ("in", "in"),
        ("=", "="),
        ("==", "=="),
        (">", "gt"),
        ("<", "lt"),
        ("!", "!"),  # the longest valid token found
        ("!=", "!="),
        ("(", "("),
        (")", ")"),
        ("~", "identifier"),  # characters that are not special belong to an identifier
        ("||", "identifier"),
    ],
)
def test_the_lexer_reads_one_token(text, token):
    tok, literal = v.lex_selector(text)[0]
    assert tok == token and literal == text


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("key in ( value )", ["identifier", "in", "(", "identifier", ")"]),
        ("key notin ( value )", ["identifier", "notin", "(", "identifier", ")"]),
        ("key in ( value1, value2 )", ["identifier", "in", "(", "identifier", ",", "identifier", ")"]),
        ("key", ["identifier"]),
        ("!key", ["!", "identifier"]),
        ("()", ["(", ")"]),
        ("x in (),y", ["identifier", "in", "(", ")", ",", "identifier"]),
        ("== != (), = notin", ["==", "!=", "(", ")", ",", "=", "notin"]),
        ("key>2", ["identifier", "gt", "identifier"]),
        ("key<1", ["identifier", "lt", "identifier"]),
    ],
)
def test_the_lexer_reads_a_sequence_then_the_end(text, tokens):
    lexed = v.lex_selector(text)
    assert [t for t, _ in lexed] == [*tokens, "end"]


# --- TestParseOperator ----------------------------------------------------------------------


@pytest.mark.parametrize("operator", ["in", "=", "==", ">", "<", "notin", "!="])
def test_every_binary_operator_parses(operator):
    value = "(a)" if operator in ("in", "notin") else "1"
    assert len(parse(f"x {operator} {value}")) == 1


@pytest.mark.parametrize("token, found", [("!", "!"), ("exists", "exists"), ("(", "(")])
def test_a_token_that_is_no_binary_operator_is_named_in_the_error(token, found):
    with pytest.raises(SelectorError) as refused:
        parse(f"x {token} a")
    assert f"found '{found}', expected: in, notin, =, ==, !=, gt, lt" in str(refused.value)


# --- TestRequirementConstructor -------------------------------------------------------------


@pytest.mark.parametrize(
    "key, op, values, valid",
    [
        ("x1", "in", (), False),
        ("x2", "notin", (), False),
        ("x3", "in", ("foo",), True),
        ("x4", "notin", ("foo",), True),
        ("x5", "=", ("foo", "bar"), False),
        ("x6", "exists", (), True),
        ("x7", "!", (), True),
        ("x8", "exists", ("foo",), False),
        ("x9", "in", ("bar",), True),
        ("x10", "in", ("bar",), True),
        ("x11", "gt", ("1",), True),
        ("x12", "lt", ("6",), True),
        ("x13", "gt", (), False),
        ("x14", "gt", ("bar",), False),
        ("x15", "lt", ("bar",), False),
        ("a" * 254, "exists", (), False),  # a key longer than DNS allows
        ("x16", "=", ("a" * 254,), False),
        ("x17", "=", ("a b",), False),
        ("x18", "unsupportedOp", (), False),
    ],
)
def test_a_requirement_is_built_only_when_valid(key, op, values, valid):
    if valid:
        assert v.new_requirement(key, op, values) == Requirement(key, op, tuple(sorted(values)))
    else:
        with pytest.raises(SelectorError):
            v.new_requirement(key, op, values)


# --- TestToString ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requirements, text",
    [
        (
            [req("x", "in", "abc", "def"), req("y", "notin", "jkl"), req("z", "exists")],
            "x in (abc,def),y notin (jkl),z",
        ),
        ([req("x", "notin", "abc", "def"), req("y", "!=", "jkl"), req("z", "!")], "x notin (abc,def),y!=jkl,!z"),
        (
            [req("x", "notin", "abc"), req("y", "in", "jkl", "mno"), req("z", "notin", "")],
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            [req("x", "=", "abc"), req("y", "==", "jkl"), req("z", "!=", "a"), req("z", "exists")],
            "x=abc,y==jkl,z!=a,z",
        ),
        ([req("x", "gt", "2"), req("y", "lt", "8"), req("z", "exists")], "x>2,y<8,z"),
    ],
)
def test_requirements_are_written_as_kubectl_prints_them(requirements, text):
    assert v.selector_string(requirements) == text


# --- TestRequirementSelectorMatching --------------------------------------------------------


@pytest.mark.parametrize(
    "labels, requirements, matches",
    [
        ({"x": "foo", "y": "baz"}, [req("x", "in", "foo"), req("y", "notin", "alpha")], True),
        ({"x": "foo", "y": "baz"}, [req("x", "in", "foo"), req("y", "in", "alpha")], False),
        ({"y": ""}, [req("x", "notin", ""), req("y", "exists")], True),
        ({"y": ""}, [req("x", "!"), req("y", "exists")], True),
        ({"y": ""}, [req("x", "notin", ""), req("y", "!")], False),
        ({"y": "baz"}, [req("x", "in", "")], False),
        ({"z": "2"}, [req("z", "gt", "1")], True),
        ({"z": "v2"}, [req("z", "gt", "1")], False),
    ],
)
def test_requirements_select_together(labels, requirements, matches):
    assert all(v.requirement_matches(r, labels) for r in requirements) is matches


def test_a_requirement_of_no_known_operator_selects_nothing():
    assert not v.requirement_matches(Requirement("x", "", ()), {"x": "foo", "y": "baz"})


# --- TestSetSelectorParser ------------------------------------------------------------------

E = "exists"


@pytest.mark.parametrize(
    "text, requirements",
    [
        ("", []),
        ("\rx", [("x", E)]),
        ("this-is-a-dns.domain.com/key-with-dash", [("this-is-a-dns.domain.com/key-with-dash", E)]),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            [("this-is-another-dns.domain.com/key-with-dash", "in", "so", "what")],
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            [("0.1.2.domain/99", "notin", "10.10.100.1", "tick.tack.clock")],
        ),
        ("foo  in\t (abc)", [("foo", "in", "abc")]),
        ("x notin\n (abc)", [("x", "notin", "abc")]),
        ("x  notin\t\t\t(abc,def)", [("x", "notin", "abc", "def")]),
        ("x in (abc,def)", [("x", "in", "abc", "def")]),
        ("x in (abc,)", [("x", "in", "abc", "")]),
        ("x in (abc,abc)", [("x", "in", "abc")]),
        ("x in ()", [("x", "in", "")]),
        ("x in (a,,)", [("x", "in", "a", "")]),
        ("x in (a,,,)", [("x", "in", "a", "")]),
        ("x in (a,,,,,,)", [("x", "in", "a", "")]),
        ("x in (a,,a,,a,,a,,)", [("x", "in", "a", "")]),
        (
            "x notin (abc,,def),bar,z in (),w",
            [("bar", E), ("w", E), ("x", "notin", "abc", "", "def"), ("z", "in", "")],
        ),
        ("x=a", [("x", "=", "a")]),
        ("x>1", [("x", "gt", "1")]),
        ("x<7", [("x", "lt", "7")]),
        ("x=a,y!=b", [("x", "=", "a"), ("y", "!=", "b")]),
        ("x=a,y!=b,z in (h,i,j)", [("x", "=", "a"), ("y", "!=", "b"), ("z", "in", "h", "i", "j")]),
        ("x notin ( )", [("x", "notin", "")]),
        ("x notin (, a)", [("x", "notin", "", "a")]),
        ("a ", [("a", E)]),
        ("a in (x,y,notin, z,in)", [("a", "in", "in", "notin", "x", "y", "z")]),  # 'in' among the values
    ],
)
def test_a_set_selector_parses_to_its_requirements(text, requirements):
    assert parse(text) == [req(*r) for r in requirements]


def test_requirements_come_sorted_by_key():
    assert [r.key for r in parse("x,y in (a)")] == ["x", "y"]


@pytest.mark.parametrize(
    "text",
    [
        "x=a||y=b",
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",  # no comma
        "a notin(",  # badly formed
        "a (",
        "(",
    ],
)
def test_a_badly_formed_set_selector_is_refused(text):
    with pytest.raises(SelectorError):
        parse(text)


# --- label keys and values (content.IsLabelKey, content.IsLabelValue) -------------------------


@pytest.mark.parametrize(
    "key, valid",
    [
        ("simple", True),
        ("now-with-dashes", True),
        ("1-starts-with-num", True),
        ("1234", True),
        ("simple/simple", True),
        ("now-with-dashes/simple", True),
        ("nvidia.com/gpu.product", True),
        ("brick.cloud/gpu.sharing", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("/simple", False),  # an empty prefix
        ("Example.com/simple", False),  # a prefix is lowercase
        ("a/b/c", False),
        ("-starts-with-dash", False),
        ("ends-with-dash-", False),
        ("has space", False),
        ("example.com/", False),
        ("", False),
    ],
)
def test_label_keys_are_checked_as_the_api_server_checks_them(key, valid):
    assert (v.label_key_errors(key) == []) is valid


@pytest.mark.parametrize(
    "value, valid",
    [("", True), ("simple", True), ("A100_40GB.x", True), ("a" * 63, True), ("a" * 64, False), ("-x", False)],
)
def test_label_values_are_checked_as_the_api_server_checks_them(value, valid):
    assert (v.label_value_errors(value) == []) is valid


def test_gt_and_lt_compare_as_64_bit_integers():
    assert v.label_selector_matches({"x": "-3"}, "x<2")
    with pytest.raises(SelectorError):  # "-2" is no label value
        parse("x<-2")
    assert not v.label_selector_matches({"x": "9223372036854775808"}, "x>1")  # beyond int64: no number
    with pytest.raises(SelectorError):
        parse("x>9223372036854775808")


def test_a_selector_the_twin_cannot_read_is_refused_as_the_api_server_refuses_it(db):
    from brickadmin.cluster.base import PermanentClusterError
    from brickadmin.cluster.twin import TwinGateway

    with pytest.raises(PermanentClusterError) as refused:
        TwinGateway().list_nodes(label_selector="x in (a")
    assert refused.value.status == 400


# --- Toleration.ToleratesTaint (toleration_test.go TestTolerationToleratesTaint) --------------


@pytest.mark.parametrize(
    "toleration, taint, tolerated",
    [
        # same key and effect, Exists, the taint without a value
        (
            {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "foo", "effect": "NoSchedule"},
            True,
        ),
        # same key and effect, Exists, the taint with a value
        (
            {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
            True,
        ),
        # an empty key with Exists matches every taint of the effect
        (
            {"key": "", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
            True,
        ),
        # same key, effect and value, Equal
        (
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
            True,
        ),
        # same key and effect, other values, Equal
        (
            {"key": "foo", "operator": "Equal", "value": "value1", "effect": "NoSchedule"},
            {"key": "foo", "value": "value2", "effect": "NoSchedule"},
            False,
        ),
        # same key and value, other effects, Equal
        (
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoExecute"},
            False,
        ),
        # and the rest of ToleratesTaint's rules
        ({"key": "foo", "value": "bar"}, {"key": "foo", "value": "bar", "effect": "NoExecute"}, True),  # "" is Equal
        ({"operator": "Equal", "value": "bar"}, {"key": "other", "value": "bar", "effect": "NoSchedule"}, True),
        ({"key": "foo", "operator": "Gt", "value": "1"}, {"key": "foo", "value": "2", "effect": "NoSchedule"}, False),
        ({"operator": "Exists"}, {"key": "anything", "value": "x", "effect": "NoExecute"}, True),
    ],
)
def test_a_toleration_tolerates_a_taint_as_kubernetes_decides(toleration, taint, tolerated):
    assert v.toleration_matches(taint, toleration) is tolerated


@pytest.mark.parametrize(
    "taint, host_network, tolerated",
    [
        ({"key": v.UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}, False, True),  # a cordon
        ({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, False, True),
        ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, False, True),
        ({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}, False, True),
        ({"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}, False, False),
        ({"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}, True, True),
        ({"key": v.UNSCHEDULABLE_TAINT_KEY, "effect": "NoExecute"}, False, False),  # added for NoSchedule only
        ({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, False, False),
        ({"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}, False, True),  # never keeps a pod off
    ],
)
def test_a_daemonset_pod_tolerates_what_the_controller_adds_for_it(taint, host_network, tolerated):
    assert v.tolerates([taint], [], host_network=host_network) is tolerated
