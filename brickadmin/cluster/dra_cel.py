"""CEL device selectors, evaluated as Kubernetes evaluates them for DRA.

A port of k8s.io/dynamic-resource-allocation/cel (compile.go) for the twin's allocator: one
variable, ``device``, with ``driver`` (string), ``attributes`` and ``capacity`` (maps from
domain to maps from name to value; a domain the device does not have is an empty map, a name
it does not have is the runtime error ``no such key``) and ``allowMultipleAllocations``.
Attribute names without a domain belong to the device's driver. Attribute values are int,
bool, string or semver; capacities are quantities.

The language is the part of CEL that selectors use: literals, ``device`` and ``cel.bind``
variables, field and index access, ``in``, comparisons, arithmetic, ``!``, ``&&``, ``||``
(commutative over errors, as CEL's are), the ternary, lists, the ``all``/``exists``/
``exists_one`` macros, ``size``, the string functions ``startsWith``, ``endsWith``,
``contains``, ``lowerAscii``, ``upperAscii``, and Kubernetes' quantity and semver libraries
(``quantity()``, ``isQuantity()``, ``semver()``, ``isSemver()``, ``compareTo``,
``isLessThan``, ``isGreaterThan``, ``sign``, ``major``/``minor``/``patch``...). A light
check before evaluation refuses what cel-go's type checker refuses for these: unknown
names, fields and functions, operands of known different types, a result that is not a
bool. Regular expressions (``matches``), cost limits and other CEL libraries are not here:
an expression using them does not compile, and the twin says so for the claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from .upstream.quantity import parse_quantity


class CELError(Exception):
    """A compile or runtime error; its text is cel-go's where the scheduler shows it."""


class CompileError(CELError):
    pass


class EvalError(CELError):
    pass


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class Quantity:
    value: Decimal
    text: str


@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    text: str = ""


def _digits(s: str) -> bool:
    return s != "" and all("0" <= c <= "9" for c in s)


def _ident_ok(s: str) -> bool:
    return s != "" and all(c.isascii() and (c.isalnum() or c == "-") for c in s)


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """blang/semver's Parse (strict 2.0.0); ``normalize`` as Kubernetes' semver(s, true): a
    leading ``v`` dropped, a missing minor or patch taken as 0, leading zeros dropped."""
    s = text
    if normalize:
        if s.startswith("v"):
            s = s[1:]
    core, plus, build = s.partition("+")
    core, dash, pre = core.partition("-")
    parts = core.split(".")
    if normalize:
        if not 1 <= len(parts) <= 3 or not all(_digits(p) for p in parts):
            raise EvalError(f"invalid semver: {text}")
        parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    if len(parts) != 3:
        raise EvalError(f"No Major.Minor.Patch elements found: {text}")
    for p in parts:
        if not _digits(p) or (len(p) > 1 and p[0] == "0"):
            raise EvalError(f"invalid semver: {text}")
    pres: tuple[str, ...] = ()
    if dash:
        pres = tuple(pre.split("."))
        for p in pres:
            if not _ident_ok(p) or (_digits(p) and len(p) > 1 and p[0] == "0"):
                raise EvalError(f"invalid semver: {text}")
    if plus and not all(_ident_ok(b) for b in build.split(".")):
        raise EvalError(f"invalid semver: {text}")
    return Semver(int(parts[0]), int(parts[1]), int(parts[2]), pres, text)


def _pre_key(p: str) -> tuple[int, int, str]:
    # numeric identifiers sort below alphanumeric ones (semver 2.0.0, item 11)
    return (0, int(p), "") if _digits(p) else (1, 0, p)


def semver_compare(a: Semver, b: Semver) -> int:
    for x, y in ((a.major, b.major), (a.minor, b.minor), (a.patch, b.patch)):
        if x != y:
            return -1 if x < y else 1
    if a.pre == b.pre:
        return 0
    if not a.pre or not b.pre:
        return 1 if not a.pre else -1
    for p, q in zip(a.pre, b.pre, strict=False):
        kp, kq = _pre_key(p), _pre_key(q)
        if kp != kq:
            return -1 if kp < kq else 1
    return -1 if len(a.pre) < len(b.pre) else (1 if len(a.pre) > len(b.pre) else 0)


class DefaultMap(dict[str, Any]):
    """compile.go's mapper: looking up a domain the device does not have gives an empty map."""


# ---------------------------------------------------------------- tokens

_PUNCT2 = ("==", "!=", "<=", ">=", "&&", "||")
_PUNCT1 = "<>!?:()[]{}.,+-*/%"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?", "a": "\a", "b": "\b"}
_ESCAPES |= {"f": "\f", "v": "\v"}


@dataclass(frozen=True)
class Tok:
    kind: str  # "int", "uint", "double", "string", "ident", "op", "end"
    value: Any
    pos: int


def _syntax(msg: str, pos: int) -> CompileError:
    return CompileError(f"ERROR: <input>:1:{pos + 1}: Syntax error: {msg}")


def _read_string(src: str, i: int, raw: bool) -> tuple[str, int]:
    quote = src[i]
    triple = src.startswith(quote * 3, i)
    end = quote * 3 if triple else quote
    i += len(end)
    out: list[str] = []
    while True:
        if i >= len(src) or (not triple and src[i] == "\n"):
            raise _syntax("unterminated string", i)
        if src.startswith(end, i):
            return "".join(out), i + len(end)
        c = src[i]
        if c == "\\" and not raw:
            nxt = src[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
            elif nxt in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                hexpart = src[i + 2 : i + 2 + width]
                if len(hexpart) != width or not all(h in "0123456789abcdefABCDEF" for h in hexpart):
                    raise _syntax("invalid escape sequence", i)
                out.append(chr(int(hexpart, 16)))
                i += 2 + width
            else:
                raise _syntax("invalid escape sequence", i)
        else:
            out.append(c)
            i += 1


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in " \t\r\n":
            i += 1
        elif src.startswith("//", i):
            while i < n and src[i] != "\n":
                i += 1
        elif c in "'\"":
            s, j = _read_string(src, i, raw=False)
            toks.append(Tok("string", s, i))
            i = j
        elif c in "rR" and src[i + 1 : i + 2] in ("'", '"'):
            s, j = _read_string(src, i + 1, raw=True)
            toks.append(Tok("string", s, i))
            i = j
        elif "0" <= c <= "9" or (c == "." and "0" <= src[i + 1 : i + 2] <= "9" and src[i + 1 : i + 2] != ""):
            j = i
            if src.startswith(("0x", "0X"), i):
                j = i + 2
                while j < n and src[j] in "0123456789abcdefABCDEF":
                    j += 1
                value: Any = int(src[i + 2 : j], 16)
                kind = "int"
            else:
                while j < n and "0" <= src[j] <= "9":
                    j += 1
                kind = "int"
                if j < n and src[j] == "." and "0" <= src[j + 1 : j + 2] <= "9" and src[j + 1 : j + 2] != "":
                    kind = "double"
                    j += 1
                    while j < n and "0" <= src[j] <= "9":
                        j += 1
                if j < n and src[j] in "eE":
                    k = j + 1
                    if k < n and src[k] in "+-":
                        k += 1
                    if k < n and "0" <= src[k] <= "9":
                        kind = "double"
                        j = k
                        while j < n and "0" <= src[j] <= "9":
                            j += 1
                value = float(src[i:j]) if kind == "double" else int(src[i:j])
            if j < n and src[j] in "uU" and kind == "int":
                kind = "uint"
                j += 1
            if kind == "int" and value > 2**63 - 1:
                raise _syntax("integer literal out of range", i)
            toks.append(Tok(kind, value, i))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_") and src[j].isascii():
                j += 1
            toks.append(Tok("ident", src[i:j], i))
            i = j
        elif src[i : i + 2] in _PUNCT2:
            toks.append(Tok("op", src[i : i + 2], i))
            i += 2
        elif c in _PUNCT1:
            toks.append(Tok("op", c, i))
            i += 1
        else:
            raise _syntax(f"token recognition error at: '{c}'", i)
    toks.append(Tok("end", None, n))
    return toks


# ---------------------------------------------------------------- syntax tree

# Nodes are tuples: ("lit", value), ("ident", name), ("select", operand, field),
# ("index", operand, key), ("call", name, target | None, args), ("list", items),
# ("map", pairs), ("not", x), ("neg", x), ("and", a, b), ("or", a, b),
# ("cond", c, a, b), ("bin", op, a, b), ("macro", name, target, var, body),
# ("bind", var, init, body).
Node = tuple[Any, ...]

_RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop"}
_RESERVED |= {"package", "namespace", "return", "var", "void", "while"}
_RELOPS = {"==", "!=", "<", "<=", ">", ">=", "in"}


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = tokenize(src)
        self.i = 0

    def peek(self) -> Tok:
        return self.toks[self.i]

    def take(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, op: str) -> bool:
        t = self.peek()
        return (t.kind == "op" and t.value == op) or (op == "in" and t.kind == "ident" and t.value == "in")

    def expect(self, op: str) -> None:
        if not self.at(op):
            t = self.peek()
            got = "<EOF>" if t.kind == "end" else repr(t.value)
            raise _syntax(f"mismatched input {got} expecting '{op}'", t.pos)
        self.take()

    def parse(self) -> Node:
        node = self.expr()
        t = self.peek()
        if t.kind != "end":
            raise _syntax(f"extraneous input {t.value!r}", t.pos)
        return node

    def expr(self) -> Node:
        cond = self.or_()
        if self.at("?"):
            self.take()
            a = self.or_()
            self.expect(":")
            b = self.expr()
            return ("cond", cond, a, b)
        return cond

    def or_(self) -> Node:
        node = self.and_()
        while self.at("||"):
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.relation()
        while self.at("&&"):
            self.take()
            node = ("and", node, self.relation())
        return node

    def relation(self) -> Node:
        node = self.addition()
        while any(self.at(op) for op in _RELOPS):
            op = self.take().value
            node = ("bin", op, node, self.addition())
        return node

    def addition(self) -> Node:
        node = self.multiplication()
        while self.at("+") or self.at("-"):
            op = self.take().value
            node = ("bin", op, node, self.multiplication())
        return node

    def multiplication(self) -> Node:
        node = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            op = self.take().value
            node = ("bin", op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.at("!"):
            self.take()
            return ("not", self.unary())
        if self.at("-"):
            self.take()
            t = self.peek()
            after = self.toks[self.i + 1]
            if t.kind in ("int", "double") and not (after.kind == "op" and after.value in ".["):
                self.take()
                if t.kind == "int" and t.value > 2**63:
                    raise _syntax("integer literal out of range", t.pos)
                return ("lit", -t.value)
            return ("neg", self.unary())
        return self.member()

    def args(self) -> list[Node]:
        self.expect("(")
        out: list[Node] = []
        if not self.at(")"):
            out.append(self.expr())
            while self.at(","):
                self.take()
                out.append(self.expr())
        self.expect(")")
        return out

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.at("."):
                self.take()
                t = self.take()
                if t.kind != "ident":
                    raise _syntax("no viable alternative", t.pos)
                if self.at("("):
                    node = self.call(t.value, node, self.args(), t.pos)
                else:
                    node = ("select", node, t.value)
            elif self.at("["):
                self.take()
                key = self.expr()
                self.expect("]")
                node = ("index", node, key)
            else:
                return node

    def call(self, name: str, target: Node | None, args: list[Node], pos: int) -> Node:
        if target is not None and name in ("all", "exists", "exists_one") and len(args) == 2:
            if args[0][0] != "ident":
                raise CompileError(f"ERROR: <input>:1:{pos + 1}: argument must be a simple name")
            return ("macro", name, target, args[0][1], args[1])
        if target == ("ident", "cel") and name == "bind" and len(args) == 3:
            if args[0][0] != "ident":
                raise CompileError(f"ERROR: <input>:1:{pos + 1}: cel.bind() variable names must be simple identifiers")
            return ("bind", args[0][1], args[1], args[2])
        if target is None and name == "has" and len(args) == 1:
            if args[0][0] != "select":
                raise CompileError(f"ERROR: <input>:1:{pos + 1}: invalid argument to has() macro")
            return ("has", args[0][1], args[0][2])
        return ("call", name, target, args)

    def primary(self) -> Node:
        t = self.take()
        if t.kind in ("int", "uint", "double", "string"):
            return ("lit", _UInt(t.value) if t.kind == "uint" else t.value)
        if t.kind == "ident":
            if t.value in ("true", "false"):
                return ("lit", t.value == "true")
            if t.value == "null":
                return ("lit", None)
            if t.value in _RESERVED or t.value == "in":
                raise _syntax(f"reserved identifier: {t.value}", t.pos)
            if self.at("("):
                return self.call(t.value, None, self.args(), t.pos)
            return ("ident", t.value)
        if t.kind == "op" and t.value == "(":
            node = self.expr()
            self.expect(")")
            return node
        if t.kind == "op" and t.value == "[":
            items: list[Node] = []
            if not self.at("]"):
                items.append(self.expr())
                while self.at(","):
                    self.take()
                    if self.at("]"):
                        break
                    items.append(self.expr())
            self.expect("]")
            return ("list", items)
        if t.kind == "op" and t.value == "{":
            pairs: list[tuple[Node, Node]] = []
            if not self.at("}"):
                while True:
                    k = self.expr()
                    self.expect(":")
                    pairs.append((k, self.expr()))
                    if not self.at(","):
                        break
                    self.take()
                    if self.at("}"):
                        break
            self.expect("}")
            return ("map", pairs)
        got = "<EOF>" if t.kind == "end" else repr(t.value)
        raise _syntax(f"mismatched input {got}", t.pos)


class _UInt(int):
    """An unsigned CEL integer (``1u``): a different type from int for equality."""


# ---------------------------------------------------------------- checking

# Static types: "bool", "int", "uint", "double", "string", "null", "quantity", "semver",
# "list", "map", "dyn", "device", "attrs" (domain -> names), "attrdomain" (name -> value),
# "caps", "capdomain" (name -> quantity).
_NUMERIC = {"int", "uint", "double"}
_PRIMS = {"bool", "int", "uint", "double", "string", "null", "quantity", "semver"}
_DEVICE_FIELDS = {"driver": "string", "attributes": "attrs", "capacity": "caps", "allowMultipleAllocations": "bool"}
_ELEM = {"attrs": "attrdomain", "attrdomain": "dyn", "caps": "capdomain", "capdomain": "quantity", "map": "dyn"}
_ELEM |= {"list": "dyn", "dyn": "dyn"}
_MAPLIKE = {"attrs", "attrdomain", "caps", "capdomain", "map", "dyn"}

# name -> (receiver type or None for a global, argument types, result type); "dyn" matches anything
_FUNCS: dict[str, list[tuple[str | None, tuple[str, ...], str]]] = {
    "quantity": [(None, ("string",), "quantity")],
    "isQuantity": [(None, ("string",), "bool")],
    "semver": [(None, ("string",), "semver"), (None, ("string", "bool"), "semver")],
    "isSemver": [(None, ("string",), "bool"), (None, ("string", "bool"), "bool")],
    "size": [(None, ("dyn",), "int"), ("dyn", (), "int")],
    "int": [(None, ("dyn",), "int")],
    "string": [(None, ("dyn",), "string")],
    "compareTo": [("quantity", ("quantity",), "int"), ("semver", ("semver",), "int")],
    "isLessThan": [("quantity", ("quantity",), "bool"), ("semver", ("semver",), "bool")],
    "isGreaterThan": [("quantity", ("quantity",), "bool"), ("semver", ("semver",), "bool")],
    "sign": [("quantity", (), "int")],
    "isInteger": [("quantity", (), "bool")],
    "asInteger": [("quantity", (), "int")],
    "asApproximateFloat": [("quantity", (), "double")],
    "add": [("quantity", ("quantity",), "quantity"), ("quantity", ("int",), "quantity")],
    "sub": [("quantity", ("quantity",), "quantity"), ("quantity", ("int",), "quantity")],
    "major": [("semver", (), "int")],
    "minor": [("semver", (), "int")],
    "patch": [("semver", (), "int")],
    "startsWith": [("string", ("string",), "bool")],
    "endsWith": [("string", ("string",), "bool")],
    "contains": [("string", ("string",), "bool")],
    "lowerAscii": [("string", (), "string")],
    "upperAscii": [("string", (), "string")],
}


def _overload(op: str, *types: str) -> CompileError:
    return CompileError(f"ERROR: <input>:1:1: found no matching overload for '{op}' applied to '({', '.join(types)})'")


def _compat(want: str, got: str) -> bool:
    return want == "dyn" or got == "dyn" or want == got or (want == "map" and got in _MAPLIKE)


def _check(node: Node, scope: Mapping[str, str]) -> str:  # noqa: C901  (one case per node kind)
    kind = node[0]
    if kind == "lit":
        v = node[1]
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, _UInt):
            return "uint"
        return {int: "int", float: "double", str: "string"}[type(v)]
    if kind == "ident":
        if node[1] in scope:
            return scope[node[1]]
        raise CompileError(f"ERROR: <input>:1:1: undeclared reference to '{node[1]}' (in container '')")
    if kind == "select":
        t = _check(node[1], scope)
        if t == "device":
            if node[2] not in _DEVICE_FIELDS:
                raise CompileError(f"ERROR: <input>:1:1: undefined field '{node[2]}'")
            return _DEVICE_FIELDS[node[2]]
        if t in _MAPLIKE:
            return _ELEM[t]
        raise CompileError(f"ERROR: <input>:1:1: type '{t}' does not support field selection")
    if kind == "has":
        t = _check(node[1], scope)
        if t not in _MAPLIKE and t != "device":
            raise CompileError(f"ERROR: <input>:1:1: type '{t}' does not support field selection")
        return "bool"
    if kind == "index":
        t, k = _check(node[1], scope), _check(node[2], scope)
        if t in ("attrs", "attrdomain", "caps", "capdomain") and not _compat("string", k):
            raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '_[_]' applied to '({t}, {k})'")
        if t in _ELEM:
            return _ELEM[t]
        raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '_[_]' applied to '({t}, {k})'")
    if kind == "list":
        for item in node[1]:
            _check(item, scope)
        return "list"
    if kind == "map":
        for k, v in node[1]:
            _check(k, scope)
            _check(v, scope)
        return "map"
    if kind in ("not", "and", "or"):
        for sub in node[1:]:
            t = _check(sub, scope)
            if not _compat("bool", t):
                op = {"not": "!_", "and": "_&&_", "or": "_||_"}[kind]
                raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '{op}' applied to '({t})'")
        return "bool"
    if kind == "neg":
        t = _check(node[1], scope)
        if t not in ("int", "double", "dyn"):
            raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '-_' applied to '({t})'")
        return t
    if kind == "cond":
        c, a, b = (_check(x, scope) for x in node[1:])
        if not _compat("bool", c):
            raise _overload("_?_:_", c, a, b)
        return a if a == b else "dyn"
    if kind == "bin":
        op, a, b = node[1], _check(node[2], scope), _check(node[3], scope)
        if op == "in":
            if b not in ("list", "map", "attrs", "attrdomain", "caps", "capdomain", "dyn"):
                raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '@in' applied to '({a}, {b})'")
            return "bool"
        known = a in _PRIMS and b in _PRIMS
        if op in ("==", "!="):
            if known and a != b and not (a == "null" or b == "null") and not (a in _NUMERIC and b in _NUMERIC):
                raise _overload(f"_{op}_", a, b)
            return "bool"
        if op in ("<", "<=", ">", ">="):
            if known and (a != b and not (a in _NUMERIC and b in _NUMERIC) or a in ("null", "quantity", "semver")):
                raise _overload(f"_{op}_", a, b)
            return "bool"
        if known and a != b:
            raise _overload(f"_{op}_", a, b)
        return a if a != "dyn" else b
    if kind == "macro":
        target = _check(node[2], scope)
        body = _check(node[4], {**scope, node[3]: _key_type(target)})
        if not _compat("bool", body):
            raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '{node[1]}' applied to '({body})'")
        return "bool"
    if kind == "bind":
        return _check(node[3], {**scope, node[1]: _check(node[2], scope)})
    # call
    name, target, args = node[1], node[2], node[3]
    overloads = _FUNCS.get(name)
    if overloads is None:
        raise CompileError(f"ERROR: <input>:1:1: undeclared reference to '{name}' (in container '')")
    tt = None if target is None else _check(target, scope)
    ats = tuple(_check(a, scope) for a in args)
    for recv, params, result in overloads:
        if (recv is None) != (tt is None) or len(params) != len(ats):
            continue
        if recv is not None and tt is not None and not _compat(recv, tt):
            continue
        if all(_compat(p, a) for p, a in zip(params, ats, strict=True)):
            return result
    shown = ", ".join(([tt] if tt else []) + list(ats))
    raise CompileError(f"ERROR: <input>:1:1: found no matching overload for '{name}' applied to '({shown})'")


def _key_type(t: str) -> str:
    return "string" if t in ("attrs", "attrdomain", "caps", "capdomain") else "dyn"


@dataclass(frozen=True)
class Program:
    expression: str
    node: Node

    def matches(self, device: Mapping[str, Any], driver: str) -> bool:
        """Whether the selector selects ``device`` (a ResourceSlice device) of ``driver``;
        raises EvalError as cel-go's evaluation fails."""
        return self.selects(device_variable(device, driver))

    def selects(self, variable: Mapping[str, Any]) -> bool:
        """As ``matches``, given the ``device`` variable (device_variable), which the
        allocator builds once per device for all the selectors it checks."""
        result = _eval(self.node, {"device": variable})
        if not isinstance(result, bool):
            raise EvalError(f"CEL result of type {_type_name(result)} could not be converted to bool")
        return result


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Program:
    """Parse and check a selector; CompileError as ``compilation failed: ...``."""
    try:
        node = _Parser(expression).parse()
        t = _check(node, {"device": "device"})
    except CompileError as e:
        raise CompileError(f"compilation failed: {e}") from None
    if t not in ("bool", "dyn"):
        raise CompileError(f"must evaluate to bool or the unknown type, not {_CEL_TYPE.get(t, t)}")
    return Program(expression, node)


_CEL_TYPE = {"attrs": "map", "attrdomain": "map", "caps": "map", "capdomain": "map", "quantity": "kubernetes.Quantity"}


# ---------------------------------------------------------------- evaluation


def _attribute(value: Mapping[str, Any]) -> Any:
    if "int" in value:
        return int(value["int"])
    if "bool" in value:
        return bool(value["bool"])
    if "string" in value:
        return str(value["string"])
    if "version" in value:
        return parse_semver(str(value["version"]))
    raise EvalError("unsupported attribute value")


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def device_variable(device: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """The ``device`` variable as compile.go's DeviceMatches builds it."""
    attributes: DefaultMap = DefaultMap()
    for name, attr in (device.get("attributes") or {}).items():
        try:
            value = _attribute(attr if isinstance(attr, Mapping) else {})
        except EvalError as e:
            raise EvalError(f"attribute {name}: {e}") from None
        domain, ident = _qualified(str(name), driver)
        attributes.setdefault(domain, {})[ident] = value
    capacity: DefaultMap = DefaultMap()
    for name, cap in (device.get("capacity") or {}).items():
        raw = (cap or {}).get("value") if isinstance(cap, Mapping) else cap
        domain, ident = _qualified(str(name), driver)
        capacity.setdefault(domain, {})[ident] = Quantity(parse_quantity(str(raw)), str(raw))
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


def _type_name(v: Any) -> str:
    if v is None:
        return "null_type"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _UInt):
        return "uint"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Quantity):
        return "kubernetes.Quantity"
    if isinstance(v, Semver):
        return "kubernetes.Semver"
    if isinstance(v, list):
        return "list"
    return "map"


def _no_overload(op: str, *vals: Any) -> EvalError:
    return EvalError(f"no such overload: {op}({', '.join(_type_name(v) for v in vals)})")


def _lookup(container: Any, key: Any) -> Any:
    if isinstance(container, dict):
        if isinstance(key, str) and key in container:
            return container[key]
        if isinstance(container, DefaultMap):
            return {}
        raise EvalError(f"no such key: {key}")
    if isinstance(container, list):
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(container):
                return container[key]
            raise EvalError(f"index out of bounds: {key}")
    raise _no_overload("_[_]", container, key)


def _equal(a: Any, b: Any) -> bool:
    num = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, num) and isinstance(b, num):
        return bool(a == b)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.value == b.value
    if isinstance(a, Semver) and isinstance(b, Semver):
        return semver_compare(a, b) == 0
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _order(op: str, a: Any, b: Any) -> bool:
    num = (int, float)
    ok = (isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool)) or (
        type(a) is type(b) and isinstance(a, (str, bool))
    )
    if not ok:
        raise _no_overload({"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_"}[op], a, b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _arith(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, bool) or isinstance(b, bool):
        raise _no_overload(op, a, b)
    if op == "+" and type(a) is type(b) and isinstance(a, (str, list)):
        return a + b
    if not (type(a) is type(b) and isinstance(a, (int, float))):
        raise _no_overload(op, a, b)
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif isinstance(a, float):
        if op == "%":
            raise _no_overload(op, a, b)
        r = a / b if b else (float("inf") if a > 0 else float("-inf") if a < 0 else float("nan"))
    else:
        if b == 0:
            raise EvalError("division by zero" if op == "/" else "modulus by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # CEL truncates toward zero
        r = q if op == "/" else a - q * b
    if isinstance(r, int) and not -(2**63) <= r < 2**63:
        raise EvalError("integer overflow")
    return type(a)(r) if isinstance(a, _UInt) else r


def _truth(node: Node, env: Mapping[str, Any]) -> bool | EvalError:
    try:
        v = _eval(node, env)
    except EvalError as e:
        return e
    if not isinstance(v, bool):
        return _no_overload("logical", v)
    return v


def _eval(node: Node, env: Mapping[str, Any]) -> Any:  # noqa: C901  (one case per node kind)
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "ident":
        return env[node[1]]
    if kind == "select":
        return _lookup(_eval(node[1], env), node[2])
    if kind == "has":
        container = _eval(node[1], env)
        if not isinstance(container, dict):
            raise _no_overload("has", container)
        return node[2] in container
    if kind == "index":
        return _lookup(_eval(node[1], env), _eval(node[2], env))
    if kind == "list":
        return [_eval(x, env) for x in node[1]]
    if kind == "map":
        return {_eval(k, env): _eval(v, env) for k, v in node[1]}
    if kind == "not":
        v = _eval(node[1], env)
        if not isinstance(v, bool):
            raise _no_overload("!_", v)
        return not v
    if kind == "neg":
        v = _eval(node[1], env)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _no_overload("-_", v)
        return -v
    if kind in ("and", "or"):
        # CEL's && and || are commutative: a decided side wins over an error on the other
        decisive = kind == "or"
        a = _truth(node[1], env)
        if a is decisive:
            return decisive
        b = _truth(node[2], env)
        if b is decisive:
            return decisive
        if isinstance(a, EvalError):
            raise a
        if isinstance(b, EvalError):
            raise b
        return not decisive
    if kind == "cond":
        c = _eval(node[1], env)
        if not isinstance(c, bool):
            raise _no_overload("_?_:_", c)
        return _eval(node[2] if c else node[3], env)
    if kind == "bin":
        op, a, b = node[1], _eval(node[2], env), _eval(node[3], env)
        if op == "==":
            return _equal(a, b)
        if op == "!=":
            return not _equal(a, b)
        if op == "in":
            if isinstance(b, dict):
                return any(_equal(a, k) for k in b)
            if isinstance(b, list):
                return any(_equal(a, x) for x in b)
            raise _no_overload("@in", a, b)
        if op in ("<", "<=", ">", ">="):
            return _order(op, a, b)
        return _arith(op, a, b)
    if kind == "macro":
        name, target, var, body = node[1], _eval(node[2], env), node[3], node[4]
        if not isinstance(target, (list, dict)):
            raise _no_overload(name, target)
        results = [_truth(body, {**env, var: item}) for item in target]
        if name == "exists_one":
            for r in results:
                if isinstance(r, EvalError):
                    raise r
            return sum(1 for r in results if r is True) == 1
        decisive = name == "exists"
        if any(r is decisive for r in results):
            return decisive
        for r in results:
            if isinstance(r, EvalError):
                raise r
        return not decisive
    if kind == "bind":
        return _eval(node[3], {**env, node[1]: _eval(node[2], env)})
    name, target, args = node[1], node[2], node[3]
    vals = [_eval(a, env) for a in args]
    if target is None:
        return _GLOBALS[name](*vals)
    recv = _eval(target, env)
    fn = _METHODS.get((name, type(recv)))
    if fn is None:
        raise _no_overload(name, recv, *vals)
    return fn(recv, *vals)


def _quantity(s: Any) -> Quantity:
    if not isinstance(s, str):
        raise _no_overload("quantity", s)
    try:
        return Quantity(parse_quantity(s), s)
    except ValueError:
        raise EvalError(f"quantities must match the regular expression: {s}") from None


def _is_quantity(s: Any) -> bool:
    try:
        _quantity(s)
    except EvalError:
        return False
    return True


def _semver(s: Any, normalize: Any = False) -> Semver:
    if not isinstance(s, str):
        raise _no_overload("semver", s)
    try:
        return parse_semver(s, bool(normalize))
    except EvalError as e:
        raise EvalError(f"invalid semver: {e}") from None


def _is_semver(s: Any, normalize: Any = False) -> bool:
    try:
        _semver(s, normalize)
    except EvalError:
        return False
    return True


def _size(v: Any) -> int:
    if isinstance(v, (str, list, dict)):
        return len(v)
    raise _no_overload("size", v)


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        raise _no_overload("int", v)
    if isinstance(v, (int, float)):
        return int(v)
    if isinstance(v, str):
        try:
            return int(v, 10)
        except ValueError:
            raise EvalError(f"cannot convert '{v}' to int") from None
    raise _no_overload("int", v)


def _to_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    if isinstance(v, Semver):
        return v.text
    if isinstance(v, Quantity):
        return v.text
    raise _no_overload("string", v)


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return semver_compare(a, b)
    raise _no_overload("compareTo", a, b)


def _q_int(q: Quantity) -> int:
    if q.value != q.value.to_integral_value() or not -(2**63) <= q.value < 2**63:
        raise EvalError("cannot convert value to integer")
    return int(q.value)


def _q_add(q: Quantity, other: Any) -> Quantity:
    v = other.value if isinstance(other, Quantity) else Decimal(_to_int(other))
    return Quantity(q.value + v, str(q.value + v))


def _q_sub(q: Quantity, other: Any) -> Quantity:
    v = other.value if isinstance(other, Quantity) else Decimal(_to_int(other))
    return Quantity(q.value - v, str(q.value - v))


def _str_arg(fn: Callable[[str, str], bool], name: str) -> Callable[[str, Any], bool]:
    def call(s: str, arg: Any) -> bool:
        if not isinstance(arg, str):
            raise _no_overload(name, s, arg)
        return fn(s, arg)

    return call


_GLOBALS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "size": _size,
    "int": _to_int,
    "string": _to_string,
}

_METHODS: dict[tuple[str, type], Callable[..., Any]] = {
    ("compareTo", Quantity): _cmp,
    ("compareTo", Semver): _cmp,
    ("isLessThan", Quantity): lambda a, b: _cmp(a, b) < 0,
    ("isLessThan", Semver): lambda a, b: _cmp(a, b) < 0,
    ("isGreaterThan", Quantity): lambda a, b: _cmp(a, b) > 0,
    ("isGreaterThan", Semver): lambda a, b: _cmp(a, b) > 0,
    ("sign", Quantity): lambda q: (q.value > 0) - (q.value < 0),
    ("isInteger", Quantity): lambda q: q.value == q.value.to_integral_value() and -(2**63) <= q.value < 2**63,
    ("asInteger", Quantity): _q_int,
    ("asApproximateFloat", Quantity): lambda q: float(q.value),
    ("add", Quantity): _q_add,
    ("sub", Quantity): _q_sub,
    ("major", Semver): lambda v: v.major,
    ("minor", Semver): lambda v: v.minor,
    ("patch", Semver): lambda v: v.patch,
    ("startsWith", str): _str_arg(str.startswith, "startsWith"),
    ("endsWith", str): _str_arg(str.endswith, "endsWith"),
    ("contains", str): _str_arg(str.__contains__, "contains"),
    ("lowerAscii", str): lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    ("upperAscii", str): lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    ("size", str): len,
    ("size", list): len,
    ("size", dict): len,
    ("size", DefaultMap): len,
}
