"""apimachinery's resource.Quantity: parsing, the amount, and the canonical form printed back.

Source: k8s.io/apimachinery/pkg/api/resource/quantity.go, suffix.go, amount.go.
Tests: tests/foundation/test_quantity.py (quantity_test.go's tables).
"""

from __future__ import annotations

import decimal
import functools
import re
from typing import Any, TypeVar

# --- resource quantities -----------------------------------------------------------
# A port of apimachinery's resource.Quantity parsing and printing
# (k8s.io/apimachinery/pkg/api/resource/quantity.go, suffix.go, amount.go). The API
# server stores every quantity in canonical form: a quota or a capacity of 1000 is read
# back as "1k", 1024 as "1Ki" when written so. Exact arithmetic: decimal.Decimal with
# a context that never rounds; the only rounding is apimachinery's own.

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"

# quantity.go splitREString: only quoted in the error, as apimachinery does.
QUANTITY_FORMAT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_WRONG = f"quantities must match the regular expression '{QUANTITY_FORMAT}'"
QUANTITY_NUMERIC = "unable to parse numeric part of quantity"
QUANTITY_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT64_MAX = (1 << 63) - 1
_NANO = decimal.Decimal("1e-9")
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero],
)


def _split_quantity(text: str) -> tuple[str, str, str, str]:
    """quantity.go parseQuantityString: (value, num, denom, suffix), the sign left in
    value. As upstream, a number may have no digits at all ("Ki", "-", "." read as 0)."""
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        pos += 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return text, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:  # anything else after the suffix
        raise ValueError(QUANTITY_FORMAT_WRONG)
    return value, num, denom, text[suffix_start:]


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    """suffix.go interpret: (base, exponent, format); ValueError for an unknown suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].removeprefix("+").removeprefix("-")
        if digits and len(digits) <= 19 and set(digits) <= _DIGITS:
            exponent = int(suffix[1:])
            if -(1 << 63) <= exponent <= _INT64_MAX:  # strconv.ParseInt(…, 10, 64)
                return 10, (exponent + (1 << 31)) % (1 << 32) - (1 << 31), DECIMAL_EXPONENT  # int32(parsed)
    raise ValueError(QUANTITY_SUFFIX)


def parse_quantity_format(text: str) -> tuple[decimal.Decimal, str]:
    """resource.ParseQuantity: the exact amount and the format it prints back in
    (DecimalSI, BinarySI or DecimalExponent); ValueError with apimachinery's reason.

    As upstream, a non-zero amount is rounded up (away from zero) to a multiple of 1n,
    a binary one is capped at 2^63-1, and a binary amount below 1 prints as DecimalSI."""
    if not isinstance(text, str):
        raise ValueError(f"a quantity is a string, not {type(text).__name__}")  # noqa: TRY004  (bad input, as junk)
    return _parse(text)[:2]


@functools.lru_cache(maxsize=4096)  # a cluster writes few distinct quantities, read on every publication
def _parse(text: str) -> tuple[decimal.Decimal, str, bool]:
    """(amount, format, whether String() gives ``text`` back unchanged): ParseQuantity
    keeps the input as its string when its int64 fast path finds it canonical."""
    if not text:
        raise ValueError(QUANTITY_FORMAT_WRONG)
    if text == "0":
        return decimal.Decimal(0), DECIMAL_SI, True
    value, num, denom, suffix = _split_quantity(text)
    base, exponent, fmt = _interpret_suffix(suffix)
    if not any(c in _DIGITS for c in value):
        # No digits at all ("Ki", "-", "."): upstream's int64 fast path reads 0; its
        # inf.Dec path ("Pi", "e-10") refuses it.
        if not _fast_path(num, denom, exponent, fmt):
            raise ValueError(QUANTITY_NUMERIC)
        return decimal.Decimal(0), fmt, False
    amount = decimal.Decimal(("-" if text[0] == "-" else "") + num + ("." + denom if denom else ""))
    if base == 10:
        amount = amount.scaleb(exponent, _EXACT)
    else:
        amount = _EXACT.multiply(amount, 1 << exponent)
    if _exponent(amount) < -9:
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_EXACT)
    if fmt == BINARY_SI and abs(amount) > _INT64_MAX:
        amount = decimal.Decimal(_INT64_MAX).copy_sign(amount)
    if fmt == BINARY_SI and 0 < abs(amount) < 1:
        fmt = DECIMAL_SI
    if amount == 0:
        amount = decimal.Decimal(0)  # no "-0"
    return amount, fmt, _kept_as_written(num, denom, exponent, fmt)


def _exponent(amount: decimal.Decimal) -> int:
    exponent = amount.as_tuple().exponent
    if not isinstance(exponent, int):  # "n", "N", "F": NaN or infinity, never a quantity
        raise TypeError(f"not a finite amount: {amount}")
    return exponent


def _fast_path(num: str, denom: str, exponent: int, fmt: str) -> bool:
    """Whether ParseQuantity takes its int64 path (few enough digits, nothing below 1n)."""
    if fmt == BINARY_SI:
        return exponent >= 0 and not denom and 15 - len(num) - exponent * 3 // 10 - 1 >= 0
    return 18 - len(num + denom) >= 0 and exponent - len(denom) >= -9


def _kept_as_written(num: str, denom: str, exponent: int, fmt: str) -> bool:
    """On ParseQuantity's int64 path, an amount whose digits have no trailing zeros to
    move into the suffix keeps the text as written (so "+1k" prints "+1k")."""
    if not _fast_path(num, denom, exponent, fmt):
        return False
    shifted = num + denom
    if fmt == BINARY_SI:
        return int(shifted) << exponent <= _INT64_MAX and exponent % 10 == 0 and int(shifted) & 7 != 0
    return (exponent - len(denom)) % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def parse_quantity(text: str) -> decimal.Decimal:
    """The exact amount of a quantity string, as resource.ParseQuantity reads it:
    "1k" -> 1000, "1Ki" -> 1024, "1e3" -> 1000, "1500m" -> 1.5. ValueError with
    apimachinery's reason for what it refuses ("", "1e", "1kk", " 1", "1 ")."""
    return parse_quantity_format(text)[0]


def quantity(value: Any) -> int:
    """A count as the product counts it: resource.Quantity.Value(), the amount rounded
    up away from zero ("1500m" -> 2, "5000m" -> 5, "1k" -> 1000, "1Ki" -> 1024). Away from
    zero also below 0, as Value() promises; upstream's inf.Dec path (more than 18 digits,
    or below 1n) breaks that promise for some negative amounts, never for a count.

    Ints pass through. Anything that is not a quantity raises ValueError, never reads as 0:
    the API server only ever returns valid quantities, so junk means a bug upstream of here.
    Free-text fields that merely hold numbers (labels, plugin config) use ``label_int``.
    Beyond int64 ("12E", a quota meaning "no limit") the amount is kept exact, as
    apimachinery keeps it (its inf.Dec amount, which the quota controller compares with
    Cmp), where Value() would overflow."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")  # noqa: TRY004  (bad input, as junk)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        value = str(value)  # a YAML/JSON number: Quantity.UnmarshalJSON reads its digits
    amount = parse_quantity(value)
    return int(amount.to_integral_value(rounding=decimal.ROUND_UP, context=_EXACT))


_LABEL_INT = re.compile(r"[+-]?[0-9]{1,18}")


_Default = TypeVar("_Default")


def label_int(value: Any, default: _Default) -> int | _Default:
    """A whole number written in free text (a label such as nvidia.com/gpu.count, a
    plugin config's replicas): an int, or a string of plain decimal digits with an
    optional sign; ``default`` for anything else, which a person may have typed."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _LABEL_INT.fullmatch(value):
        return int(value)
    return default


def _canonical_decimal(amount: decimal.Decimal) -> tuple[str, int]:
    """amount.go AsCanonicalBytes: (mantissa, exponent) with the exponent a multiple of 3
    and as large as possible without a fraction. On digit strings: any length prints."""
    sign, digits, _ = amount.as_tuple()
    exponent = _exponent(amount)
    written = "".join(map(str, digits))
    mantissa = written.rstrip("0") or "0"
    exponent += len(written) - len(mantissa)
    shift = exponent % 3
    return ("-" if sign else "") + mantissa + "0" * shift, exponent - shift


def format_quantity(value: str | int | float | decimal.Decimal, fmt: str = DECIMAL_SI) -> str:
    """Quantity.String(): the canonical form the API server writes back. A string is
    parsed and keeps its own format ("1000" -> "1k", "1024Mi" -> "1Gi", "1.5" -> "1500m");
    a number is printed in ``fmt`` (DecimalSI by default: 1000 -> "1k")."""
    if isinstance(value, str):
        amount, fmt, as_written = _parse(value)
        if as_written:
            return value
    else:
        amount = decimal.Decimal(value)
    if amount == 0:
        return "0"
    if fmt == BINARY_SI:
        whole = amount.to_integral_value(rounding=decimal.ROUND_UP, context=_EXACT)
        if -1024 < amount < 1024 or whole != amount:  # below 1Ki, or a fraction: printed as DecimalSI
            fmt = DECIMAL_SI
        else:
            count, times = int(whole), 0
            while count % 1024 == 0:
                count //= 1024
                times += 1
            # As upstream: beyond Ei there is no suffix, and none is printed.
            return f"{count}{next((k for k, v in _BINARY_SUFFIXES.items() if v == times * 10), '')}"
    mantissa, exponent = _canonical_decimal(amount)
    if fmt == DECIMAL_SI:
        # As upstream: an exponent without a suffix (beyond E) prints no suffix at all.
        suffix = next((k for k, v in _DECIMAL_SUFFIXES.items() if v == exponent), "")
    else:
        suffix = f"e{exponent}" if exponent else ""
    return f"{mantissa}{suffix}"
