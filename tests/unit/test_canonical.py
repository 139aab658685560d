"""Params compared as JSON values: one request written two ways is one request, two requests stay two."""

import json
import unicodedata

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from settled.domain.canonical import (
    _normal,
    canonical_params,
    earlier_params_digest,
    earlier_params_text,
    not_text,
    params_digest,
    same_params,
)

CAFE_NFC = unicodedata.normalize("NFC", "Café Zürich")
CAFE_NFD = unicodedata.normalize("NFD", "Café Zürich")


def parsed(text: str) -> object:
    """As a model's arguments arrive: JSON text, parsed by the standard library."""
    return json.loads(text)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ('{"amount": 5}', '{"amount": 5.0}'),
        ('{"amount": 5}', '{"amount": 5e0}'),
        ('{"amount": 700}', '{"amount": 7e2}'),
        ('{"amount": 12.5}', '{"amount": 12.50}'),
        ('{"amount": 0.1}', '{"amount": 1e-1}'),
        ('{"a": 1, "b": 2}', '{"b": 2, "a": 1}'),
        ('{"note": {"x": [1, {"y": 2}], "z": "q"}}', '{"note": {"z": "q", "x": [1.0, {"y": 2e0}]}}'),
        ('{"tags": ["a", 2]}', '{"tags": ["a", 2.0]}'),
        (json.dumps({"city": CAFE_NFC}), json.dumps({"city": CAFE_NFD})),
        (json.dumps({CAFE_NFC: 1}), json.dumps({CAFE_NFD: 1})),
        (json.dumps({"city": CAFE_NFC}, ensure_ascii=False), json.dumps({"city": CAFE_NFC})),
    ],
)
def test_the_same_value_written_two_ways_is_one(one: str, other: str) -> None:
    assert canonical_params(parsed(one)) == canonical_params(parsed(other))
    assert params_digest(parsed(one)) == params_digest(parsed(other))
    assert same_params(parsed(one), parsed(other))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ('{"amount": 5}', '{"amount": 5.1}'),
        ('{"amount": 5}', '{"amount": "5"}'),
        ('{"amount": 1}', '{"amount": true}'),
        ('{"amount": 0}', '{"amount": null}'),
        ('{"tags": [1, 2]}', '{"tags": [2, 1]}'),
        ('{"a": {}}', '{"a": []}'),
        ('{"a": 1}', '{"a": 1, "b": null}'),
        ('{"city": "Zurich"}', '{"city": "Zürich"}'),
    ],
)
def test_values_that_differ_stay_two(one: str, other: str) -> None:
    assert canonical_params(parsed(one)) != canonical_params(parsed(other))
    assert not same_params(parsed(one), parsed(other))


def test_the_form_is_rfc_8785() -> None:
    # RFC 8785's own rules: sorted keys, no white space, ECMAScript numbers, UTF-8 text unescaped.
    value = {"b": [1e21, 1e-7, -0.0, 0.5, 2**53 - 1], "a": "é\n", "c": {"z": None, "y": True}}
    assert (
        canonical_params(value)
        == '{"a":"é\\n","b":[1e+21,1e-7,0,0.5,9007199254740991],"c":{"y":true,"z":null}}'
    )


def test_an_integer_beyond_double_precision_is_the_double_json_parse_makes() -> None:
    # What any JavaScript runtime makes of the same JSON text: the nearest double.
    assert (
        canonical_params({"n": 2**60}) == canonical_params({"n": float(2**60)}) == '{"n":1152921504606847000}'
    )


def test_for_integers_and_nfc_text_the_earlier_form_is_the_same_text() -> None:
    """Ids and digests made before values were compared stay the same for most params: only floats and
    text not in NFC read differently."""
    plain = {"order_id": "o-1", "amount": 5, "currency": "EUR", "note": {"lines": ["Zürich", 2]}}
    assert canonical_params(plain) == earlier_params_text(plain)
    assert params_digest(plain) == earlier_params_digest(plain)
    assert canonical_params({"amount": 5.0}) != earlier_params_text({"amount": 5.0})


def test_a_non_finite_number_never_raises_and_equals_no_number() -> None:
    nan = float("nan")
    assert canonical_params({"a": nan}) != canonical_params({"a": 0})
    assert canonical_params({"a": float("inf")}) != canonical_params({"a": float("-inf")})


def test_anything_but_json_is_refused() -> None:
    with pytest.raises(TypeError):
        canonical_params({"a": object()})


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=3000, deadline=None)
@given(JSON)
def test_the_writer_is_the_rfc8785_library_s_on_any_json_value(value: object) -> None:
    normal = json.loads(json.dumps(value))  # as it arrives, parsed
    nfc = _normal(normal)
    assert canonical_params(normal) == rfc8785.dumps(nfc).decode()


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_double_is_written_as_ecmascript_writes_it(number: float) -> None:
    assert canonical_params(number) == rfc8785.dumps(number).decode()


def test_a_lone_surrogate_is_not_text_wherever_it_is() -> None:
    """What JSON's escapes can carry and UTF-8 cannot: named by its path, a key by its escapes."""
    assert not_text({"note": "fine é \U0001f600", "n": [1, {"k": None}]}) is None
    assert not_text({"note": "x\ud800"}) == "params.note"
    assert not_text({"a": [0, {"b": "\udc00"}]}) == "params.a.1.b"
    assert not_text({"\ud800x": 1}) == "params.\\ud800x"
    assert not_text(["\ud83d"], "args") == "args.0"
