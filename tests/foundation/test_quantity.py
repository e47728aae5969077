"""Resource quantities read exactly as Kubernetes reads them: apimachinery's own test
tables, case by case, then the counts the product takes from them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.vocabulary import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI

MAX_ALLOWED = (1 << 63) - 1  # quantity.go maxAllowed: a binary amount is capped there


def dec(i, exponent):
    """quantity_test.go decQuantity: i * 10^exponent."""
    return Decimal(i).scaleb(exponent)


# k8s.io/apimachinery/pkg/api/resource/quantity_test.go TestQuantityParse
PARSED = [
    ("0", dec(0, 0), DECIMAL_SI),
    ("0n", dec(0, 0), DECIMAL_SI),
    ("0u", dec(0, 0), DECIMAL_SI),
    ("0m", dec(0, 0), DECIMAL_SI),
    ("0Ki", dec(0, 0), BINARY_SI),
    ("0k", dec(0, 0), DECIMAL_SI),
    ("0Mi", dec(0, 0), BINARY_SI),
    ("0M", dec(0, 0), DECIMAL_SI),
    ("0Gi", dec(0, 0), BINARY_SI),
    ("0G", dec(0, 0), DECIMAL_SI),
    ("0Ti", dec(0, 0), BINARY_SI),
    ("0T", dec(0, 0), DECIMAL_SI),
    # Quantity less numbers are allowed
    ("1", dec(1, 0), DECIMAL_SI),
    # Binary suffixes
    ("1Ki", dec(1024, 0), BINARY_SI),
    ("8Ki", dec(8 * 1024, 0), BINARY_SI),
    ("7Mi", dec(7 * 1024**2, 0), BINARY_SI),
    ("6Gi", dec(6 * 1024**3, 0), BINARY_SI),
    ("5Ti", dec(5 * 1024**4, 0), BINARY_SI),
    ("4Pi", dec(4 * 1024**5, 0), BINARY_SI),
    ("3Ei", dec(3 * 1024**6, 0), BINARY_SI),
    ("10Ti", dec(10 * 1024**4, 0), BINARY_SI),
    ("100Ti", dec(100 * 1024**4, 0), BINARY_SI),
    # Decimal suffixes
    ("5n", dec(5, -9), DECIMAL_SI),
    ("4u", dec(4, -6), DECIMAL_SI),
    ("3m", dec(3, -3), DECIMAL_SI),
    ("9", dec(9, 0), DECIMAL_SI),
    ("8k", dec(8, 3), DECIMAL_SI),
    ("50k", dec(5, 4), DECIMAL_SI),
    ("7M", dec(7, 6), DECIMAL_SI),
    ("6G", dec(6, 9), DECIMAL_SI),
    ("5T", dec(5, 12), DECIMAL_SI),
    ("40T", dec(4, 13), DECIMAL_SI),
    ("300T", dec(3, 14), DECIMAL_SI),
    ("2P", dec(2, 15), DECIMAL_SI),
    ("1E", dec(1, 18), DECIMAL_SI),
    # Decimal exponents
    ("1E-3", dec(1, -3), DECIMAL_EXPONENT),
    ("1e3", dec(1, 3), DECIMAL_EXPONENT),
    ("1E6", dec(1, 6), DECIMAL_EXPONENT),
    ("1e9", dec(1, 9), DECIMAL_EXPONENT),
    ("1E12", dec(1, 12), DECIMAL_EXPONENT),
    ("1e15", dec(1, 15), DECIMAL_EXPONENT),
    ("1E18", dec(1, 18), DECIMAL_EXPONENT),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14), DECIMAL_EXPONENT),
    ("1e13", dec(1, 13), DECIMAL_EXPONENT),
    ("1e3", dec(1, 3), DECIMAL_EXPONENT),
    ("100.035k", dec(100035, 0), DECIMAL_SI),
    # Things that look like floating point
    ("0.001", dec(1, -3), DECIMAL_SI),
    ("0.0005k", dec(5, -1), DECIMAL_SI),
    ("0.005", dec(5, -3), DECIMAL_SI),
    ("0.05", dec(5, -2), DECIMAL_SI),
    ("0.5", dec(5, -1), DECIMAL_SI),
    ("0.00050k", dec(5, -1), DECIMAL_SI),
    ("0.00500", dec(5, -3), DECIMAL_SI),
    ("0.05000", dec(5, -2), DECIMAL_SI),
    ("0.50000", dec(5, -1), DECIMAL_SI),
    ("0.5e0", dec(5, -1), DECIMAL_EXPONENT),
    ("0.5e-1", dec(5, -2), DECIMAL_EXPONENT),
    ("0.5e-2", dec(5, -3), DECIMAL_EXPONENT),
    ("0.5e0", dec(5, -1), DECIMAL_EXPONENT),
    ("10.035M", dec(10035, 3), DECIMAL_SI),
    ("1.2e3", dec(12, 2), DECIMAL_EXPONENT),
    ("1.3E+6", dec(13, 5), DECIMAL_EXPONENT),
    ("1.40e9", dec(14, 8), DECIMAL_EXPONENT),
    ("1.53E12", dec(153, 10), DECIMAL_EXPONENT),
    ("1.6e15", dec(16, 14), DECIMAL_EXPONENT),
    ("1.7E18", dec(17, 17), DECIMAL_EXPONENT),
    ("9.01", dec(901, -2), DECIMAL_SI),
    ("8.1k", dec(81, 2), DECIMAL_SI),
    ("7.123456M", dec(7123456, 0), DECIMAL_SI),
    ("6.987654321G", dec(6987654321, 0), DECIMAL_SI),
    ("5.444T", dec(5444, 9), DECIMAL_SI),
    ("40.1T", dec(401, 11), DECIMAL_SI),
    ("300.2T", dec(3002, 11), DECIMAL_SI),
    ("2.5P", dec(25, 14), DECIMAL_SI),
    ("1.01E", dec(101, 16), DECIMAL_SI),
    # Things that saturate/round
    ("3.001n", dec(4, -9), DECIMAL_SI),
    ("1.1E-9", dec(2, -9), DECIMAL_EXPONENT),
    ("0.0000000001", dec(1, -9), DECIMAL_SI),
    ("0.0000000005", dec(1, -9), DECIMAL_SI),
    ("0.00000000050", dec(1, -9), DECIMAL_SI),
    ("0.5e-9", dec(1, -9), DECIMAL_EXPONENT),
    ("0.9n", dec(1, -9), DECIMAL_SI),
    ("0.00000012345", dec(124, -9), DECIMAL_SI),
    ("0.00000012354", dec(124, -9), DECIMAL_SI),
    ("9Ei", Decimal(MAX_ALLOWED), BINARY_SI),
    ("9223372036854775807Ki", Decimal(MAX_ALLOWED), BINARY_SI),
    ("12E", dec(12, 18), DECIMAL_SI),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2), BINARY_SI),
    ("0.5Mi", dec(int(0.5 * 1024 * 1024), 0), BINARY_SI),
    ("0.05Gi", dec(536870912, -1), BINARY_SI),
    ("0.025Ti", dec(274877906944, -1), BINARY_SI),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9), DECIMAL_SI),  # rounds up, changes format
    (".001", dec(1, -3), DECIMAL_SI),
    (".0001k", dec(100, -3), DECIMAL_SI),
    ("1.", dec(1, 0), DECIMAL_SI),
    ("1.G", dec(1, 9), DECIMAL_SI),
]


@pytest.mark.parametrize(("text", "amount", "fmt"), PARSED)
def test_a_quantity_parses_to_its_exact_amount_and_format(text, amount, fmt):
    assert v.parse_quantity_format(text) == (amount, fmt)
    assert v.parse_quantity(text) == amount


@pytest.mark.parametrize(("text", "amount", "fmt"), PARSED)
def test_a_minus_sign_negates_a_quantity(text, amount, fmt):
    assert v.parse_quantity_format("-" + text) == (-amount, fmt)


@pytest.mark.parametrize(("text", "amount", "fmt"), PARSED)
def test_a_plus_sign_changes_nothing(text, amount, fmt):
    assert v.parse_quantity_format("+" + text) == (amount, fmt)


# quantity_test.go TestQuantityParse (invalid), TestQuantityParseNonNumericPanic and the
# empty string; each refused with the error ParseQuantity returns.
FORMAT_WRONG = v.QUANTITY_FORMAT_WRONG
REFUSED = [
    ("", FORMAT_WRONG),
    ("1.1.M", FORMAT_WRONG),
    ("1+1.0M", FORMAT_WRONG),
    ("0.1mi", v.QUANTITY_SUFFIX),
    ("0.1am", FORMAT_WRONG),
    ("aoeu", FORMAT_WRONG),
    (".5i", v.QUANTITY_SUFFIX),
    ("1i", v.QUANTITY_SUFFIX),
    ("-3.01i", v.QUANTITY_SUFFIX),
    ("-3.01e-", v.QUANTITY_SUFFIX),
    # trailing whitespace is forbidden
    (" 1", FORMAT_WRONG),
    ("1 ", FORMAT_WRONG),
    ("Non-Numeric", FORMAT_WRONG),
    # and a suffix with nothing after its e, or twice over
    ("1e", v.QUANTITY_SUFFIX),
    ("1kk", v.QUANTITY_SUFFIX),
    ("1Kii", v.QUANTITY_SUFFIX),
    # no digits where ParseQuantity's inf.Dec path reads the number: "unable to parse numeric part"
    ("Pi", v.QUANTITY_NUMERIC),
    ("Ei", v.QUANTITY_NUMERIC),
    (".e-10", v.QUANTITY_NUMERIC),
]


@pytest.mark.parametrize(("text", "reason"), REFUSED)
def test_what_apimachinery_refuses_is_refused_with_its_reason(text, reason):
    with pytest.raises(ValueError) as refused:
        v.parse_quantity(text)
    assert str(refused.value) == reason
    with pytest.raises(ValueError):
        v.quantity(text)


@pytest.mark.parametrize(("text", "amount"), [("Ki", 0), ("k", 0), ("-", 0), ("+", 0), (".", 0), ("e5", 0)])
def test_a_number_without_digits_reads_as_zero_as_in_parse_quantity_string(text, amount):
    # quantity.go parseQuantityString: "if we stripped all numerator positions, always return 0";
    # on the int64 path nothing checks for a digit (ParseQuantity("Ki") is 0, so is "1." 1).
    assert v.parse_quantity(text) == amount


# quantity_test.go TestParseQuantityString: (input, positive, value, num, denom, suffix)
@pytest.mark.parametrize(
    ("text", "positive", "value", "num", "denom", "suffix"),
    [
        ("0.025Ti", True, "0.025", "0", "025", "Ti"),
        ("1.025Ti", True, "1.025", "1", "025", "Ti"),
        ("-1.025Ti", False, "-1.025", "1", "025", "Ti"),
        (".", True, ".", "0", "", ""),
        ("-.", False, "-.", "0", "", ""),
        ("1E-3", True, "1", "1", "", "E-3"),
    ],
)
def test_the_scanner_splits_sign_number_and_suffix(text, positive, value, num, denom, suffix):
    assert (not text.startswith("-"), *v._split_quantity(text)) == (positive, value, num, denom, suffix)


def test_zero_prints_as_zero():
    # quantity_test.go TestQuantityParseZero
    assert v.format_quantity("0") == "0"


# --- String(): the canonical form the API server writes back ---------------------------
# quantity_test.go TestQuantityString: (amount, format, canonical, an alternate spelling)
STRINGS = [
    (dec(1024**3, 0), BINARY_SI, "1Gi", "1024Mi"),
    (dec(300 * 1024**2, 0), BINARY_SI, "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), BINARY_SI, "6Ki", ""),
    (dec(1001 * 1024**3, 0), BINARY_SI, "1001Gi", "1025024Mi"),
    (dec(1024**4, 0), BINARY_SI, "1Ti", "1024Gi"),
    (dec(5, 0), BINARY_SI, "5", "5000m"),
    (dec(500, -3), BINARY_SI, "500m", "0.5"),
    (dec(1, 9), DECIMAL_SI, "1G", "1000M"),
    (dec(1000, 6), DECIMAL_SI, "1G", "0.001T"),
    (dec(1000000, 3), DECIMAL_SI, "1G", ""),
    (dec(1000000000, 0), DECIMAL_SI, "1G", ""),
    (dec(1, -3), DECIMAL_SI, "1m", "1000u"),
    (dec(80, -3), DECIMAL_SI, "80m", ""),
    (dec(1080, -3), DECIMAL_SI, "1080m", "1.08"),
    (dec(108, -2), DECIMAL_SI, "1080m", "1080000000n"),
    (dec(10800, -4), DECIMAL_SI, "1080m", ""),
    (dec(300, 6), DECIMAL_SI, "300M", ""),
    (dec(1, 12), DECIMAL_SI, "1T", ""),
    (dec(1234567, 6), DECIMAL_SI, "1234567M", ""),
    (dec(1234567, -3), BINARY_SI, "1234567m", ""),
    (dec(3, 3), DECIMAL_SI, "3k", ""),
    (dec(1025, 0), BINARY_SI, "1025", ""),
    (dec(0, 0), DECIMAL_SI, "0", ""),
    (dec(0, 0), BINARY_SI, "0", ""),
    (dec(1, 9), DECIMAL_EXPONENT, "1e9", ".001e12"),
    (dec(1, -3), DECIMAL_EXPONENT, "1e-3", "0.001e0"),
    (dec(1, -9), DECIMAL_EXPONENT, "1e-9", "1000e-12"),
    (dec(80, -3), DECIMAL_EXPONENT, "80e-3", ""),
    (dec(300, 6), DECIMAL_EXPONENT, "300e6", ""),
    (dec(1, 12), DECIMAL_EXPONENT, "1e12", ""),
    (dec(1, 3), DECIMAL_EXPONENT, "1e3", ""),
    (dec(3, 3), DECIMAL_EXPONENT, "3e3", ""),
    (dec(3, 3), DECIMAL_SI, "3k", ""),
    (dec(0, 0), DECIMAL_EXPONENT, "0", "00"),
    (dec(1, -9), DECIMAL_SI, "1n", ""),
    (dec(80, -9), DECIMAL_SI, "80n", ""),
    (dec(1080, -9), DECIMAL_SI, "1080n", ""),
    (dec(108, -8), DECIMAL_SI, "1080n", ""),
    (dec(10800, -10), DECIMAL_SI, "1080n", ""),
    (dec(1, -6), DECIMAL_SI, "1u", ""),
    (dec(80, -6), DECIMAL_SI, "80u", ""),
    (dec(1080, -6), DECIMAL_SI, "1080u", ""),
]


@pytest.mark.parametrize(("amount", "fmt", "canonical", "alternate"), STRINGS)
def test_an_amount_prints_in_canonical_form(amount, fmt, canonical, alternate):
    assert v.format_quantity(amount, fmt) == canonical
    assert v.format_quantity(canonical) == canonical
    if alternate:
        assert v.format_quantity(alternate) == canonical
    if amount:
        assert v.format_quantity(-amount, fmt) == "-" + canonical


# quantity_test.go TestQuantityParseEmit
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ],
)
def test_a_parsed_quantity_prints_back_canonical(text, canonical):
    assert v.format_quantity(text) == canonical
    assert v.format_quantity("-" + text) == "-" + canonical


# quantity_test.go TestParseQuantity: around 18, 19 and 20 digits and int64's bounds, the
# exact amount and what String() prints ("" where it prints the input unchanged).
BIG = [
    ("-999999999999999999", "-999999999999999999", ""),
    ("999999999999999999", "999999999999999999", ""),
    ("-999999999999999999.0", "-999999999999999999", "-999999999999999999"),
    ("999999999999999999.0", "999999999999999999", "999999999999999999"),
    ("-999999999999999999.1", "-999999999999999999.1", "-999999999999999999100m"),
    ("999999999999999999.1", "999999999999999999.1", "999999999999999999100m"),
    ("-9999999999999999999", "-9999999999999999999", ""),
    ("9999999999999999999", "9999999999999999999", ""),
    ("-1E", "-1000000000000000000", ""),
    ("1E", "1000000000000000000", ""),
    ("-1000000000000000000", "-1000000000000000000", "-1E"),
    ("1000000000000000000", "1000000000000000000", "1E"),
    ("-9999999999999999999.0", "-9999999999999999999", "-9999999999999999999"),
    ("9999999999999999999.0", "9999999999999999999", "9999999999999999999"),
    ("-1.0E", "-1000000000000000000", "-1E"),
    ("1.0E", "1000000000000000000", "1E"),
    ("-1000000000000000000.0", "-1000000000000000000", "-1E"),
    ("1000000000000000000.0", "1000000000000000000", "1E"),
    ("-9999999999999999999000m", "-9999999999999999999", "-9999999999999999999"),
    ("9999999999999999999000m", "9999999999999999999", "9999999999999999999"),
    ("-9999999999999999999.1", "-9999999999999999999.1", "-9999999999999999999100m"),
    ("9999999999999999999.1", "9999999999999999999.1", "9999999999999999999100m"),
    ("-1.0000000000000000001E", "-1000000000000000000.1", "-1000000000000000000100m"),
    ("1.0000000000000000001E", "1000000000000000000.1", "1000000000000000000100m"),
    ("-1000000000000000000.1", "-1000000000000000000.1", "-1000000000000000000100m"),
    ("1000000000000000000.1", "1000000000000000000.1", "1000000000000000000100m"),
    ("-1.000000000000000001E", "-1000000000000000001", "-1000000000000000001"),
    ("1.000000000000000001E", "1000000000000000001", "1000000000000000001"),
    ("-1000000000000000001", "-1000000000000000001", ""),
    ("1000000000000000001", "1000000000000000001", ""),
    ("-10E", "-10000000000000000000", ""),
    ("10E", "10000000000000000000", ""),
    ("-10000000000000000000", "-10000000000000000000", "-10E"),
    ("10000000000000000000", "10000000000000000000", "10E"),
    ("-10.0E", "-10000000000000000000", "-10E"),
    ("10.0E", "10000000000000000000", "10E"),
    ("-10000000000000000000.0", "-10000000000000000000", "-10E"),
    ("10000000000000000000.0", "10000000000000000000", "10E"),
    ("-10000000000000000000000m", "-10000000000000000000", "-10E"),
    ("10000000000000000000000m", "10000000000000000000", "10E"),
    ("-10.0000000000000000001E", "-10000000000000000000.1", "-10000000000000000000100m"),
    ("10.0000000000000000001E", "10000000000000000000.1", "10000000000000000000100m"),
    ("-10000000000000000000.1", "-10000000000000000000.1", "-10000000000000000000100m"),
    ("10000000000000000000.1", "10000000000000000000.1", "10000000000000000000100m"),
    ("-10.000000000000000001E", "-10000000000000000001", "-10000000000000000001"),
    ("10.000000000000000001E", "10000000000000000001", "10000000000000000001"),
    ("-10000000000000000001", "-10000000000000000001", ""),
    ("10000000000000000001", "10000000000000000001", ""),
    ("-9223372036854775809", "-9223372036854775809", ""),
    ("9223372036854775806", "9223372036854775806", ""),
    ("-9223372036854775809.0", "-9223372036854775809", "-9223372036854775809"),
    ("9223372036854775806.0", "9223372036854775806", "9223372036854775806"),
    ("-9223372036854775809000m", "-9223372036854775809", "-9223372036854775809"),
    ("9223372036854775806000m", "9223372036854775806", "9223372036854775806"),
    ("-9223372036854775809.1", "-9223372036854775809.1", "-9223372036854775809100m"),
    ("9223372036854775806.1", "9223372036854775806.1", "9223372036854775806100m"),
    ("-9223372036854775808", "-9223372036854775808", ""),
    ("9223372036854775807", "9223372036854775807", ""),
    ("-9223372036854775808.0", "-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807.0", "9223372036854775807", "9223372036854775807"),
    ("-9223372036854775808000m", "-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807000m", "9223372036854775807", "9223372036854775807"),
    ("-9223372036854775808.1", "-9223372036854775808.1", "-9223372036854775808100m"),
    ("9223372036854775807.1", "9223372036854775807.1", "9223372036854775807100m"),
    ("-9223372036854775807", "-9223372036854775807", ""),
    ("9223372036854775808", "9223372036854775808", ""),
    ("-9223372036854775807.0", "-9223372036854775807", "-9223372036854775807"),
    ("9223372036854775808.0", "9223372036854775808", "9223372036854775808"),
    ("-9223372036854775807000m", "-9223372036854775807", "-9223372036854775807"),
    ("9223372036854775808000m", "9223372036854775808", "9223372036854775808"),
    ("-9223372036854775807.1", "-9223372036854775807.1", "-9223372036854775807100m"),
    ("9223372036854775808.1", "9223372036854775808.1", "9223372036854775808100m"),
]


@pytest.mark.parametrize(("text", "amount", "canonical"), BIG)
def test_long_quantities_keep_every_digit(text, amount, canonical):
    assert v.parse_quantity(text) == Decimal(amount)
    assert v.format_quantity(text) == (canonical or text)


# --- the counts the product takes: Quantity.Value() --------------------------------------


@pytest.mark.parametrize(
    ("value", "count"),
    [
        # what the API server writes for whole numbers, canonical or not
        ("1k", 1000),
        ("2k", 2000),
        ("1Ki", 1024),
        ("1e3", 1000),
        ("5000m", 5),
        ("1000", 1000),
        ("4", 4),
        ("0", 0),
        (4, 4),
        (0, 0),
        (2.0, 2),
        # Value() rounds up, away from zero: quantity_test.go TestQuantityRoundUp at scale 0
        ("1500m", 2),
        ("9.01", 10),
        ("-9.01", -10),
        ("1.5Ki", 1536),
        # TestScaledValue: NewScaledQuantity(1, Nano|Micro|Milli|0).ScaledValue(0) is 1
        ("1n", 1),
        ("1u", 1),
        ("1m", 1),
        ("1", 1),
        # at int64's bound, and a binary amount capped there
        ("9223372036854775807", MAX_ALLOWED),
        ("9Ei", MAX_ALLOWED),
        # beyond int64 the amount is kept exact (quantity_test.go TestParseQuantity: "12E" is
        # decQuantity(12, 18); its edge rows past int64 keep their inf.Dec amount)
        ("12E", 12 * 10**18),
        ("9223372036854775808", 2**63),
        ("10E", 10**19),
        ("10000000000000000000.1", 10**19 + 1),
        ("-9223372036854775809", -(2**63) - 1),
    ],
)
def test_a_count_is_the_value_kubernetes_gives(value, count):
    assert v.quantity(value) == count


@pytest.mark.parametrize("junk", ["", "lots", "1 ", "two", "1kk", None, True, []])
def test_a_count_that_is_no_quantity_is_an_error_not_zero(junk):
    with pytest.raises(ValueError):
        v.quantity(junk)


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("4", 4),
        (4, 4),
        ("0", 0),
        ("-1", -1),
        ("+2", 2),
        # free text is no quantity: these are not numbers, and read as the default
        ("1k", None),
        ("four", None),
        ("", None),
        (None, None),
        ("4.0", None),
        (" 4", None),
        ("4_0", None),
        ("٤", None),
        (True, None),
    ],
)
def test_a_label_number_is_plain_decimal_digits_or_the_default(value, number):
    assert v.label_int(value, None) == number


def test_plugin_replicas_are_a_plain_int_and_anything_else_is_refused_as_zero():
    config = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: {}\n"
    assert v.time_slicing_replicas(config.format(4)) == 4
    assert v.time_slicing_replicas(config.format("1k")) == 0
    assert v.time_slicing_replicas(config.format("lots")) == 0


def test_writing_a_quota_of_a_thousand_gives_what_the_api_server_stores():
    assert v.format_quantity(1000) == "1k"
    assert v.format_quantity("1000") == "1k"
    assert v.format_quantity(1024, BINARY_SI) == "1Ki"
    assert v.format_quantity(8) == "8"


@pytest.mark.parametrize(("text", "count"), [("1e4294967296", 1), ("1e4294967299", 1000), ("1e-4294967293", 1000)])
def test_an_exponent_is_read_as_an_int32_as_upstream_does(text, count):
    # suffix.go interpret: int32(strconv.ParseInt(...)), so 2^32 wraps to 0 (checked against
    # apimachinery v0.37.0's ParseQuantity)
    assert v.quantity(text) == count
    assert v.format_quantity(text) == text
