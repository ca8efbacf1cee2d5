"""afdep.routes: kinds, positions, priority and argument errors."""

import pickle

import pytest
import torch
from hypothesis import given, settings

from afdep.routes import InvalidRouteError, find_invalid, validate
from afdep.vocab import RouteKind
from invariants.data.strategies import invalid_route_case, valid_routes


def routes(rows):
    return torch.tensor(rows, dtype=torch.int64)


def assert_invalid(topk_idx, num_experts, num_tokens, kind, token, slot):
    found = find_invalid(topk_idx, num_experts, num_tokens)
    assert found == (RouteKind(kind), token, slot) and type(found[0]) is RouteKind
    with pytest.raises(InvalidRouteError) as info:
        validate(topk_idx, num_experts, num_tokens)
    err = info.value
    assert (err.kind, err.token, err.slot) == (kind, token, slot)
    assert str(err) == f"route {kind} token={token} slot={slot}"


def test_kinds_constant():
    assert [kind.value for kind in RouteKind] == ["negative", "wide", "duplicate", "dummy"]


def test_valid_routes_pass():
    topk = routes([[0, 3], [-1, 2], [3, -1], [-1, -1]])
    assert find_invalid(topk, 4, 3) is None
    assert validate(topk, 4, 3) is None
    # -1 repeated in a row is not a duplicate, and padding rows of -1 are fine.
    assert find_invalid(routes([[-1, -1, 1], [-1, -1, -1]]), 2, 1) is None


def test_empty_shapes_are_valid():
    assert find_invalid(torch.empty(0, 4, dtype=torch.int64), 8, 0) is None
    assert find_invalid(torch.empty(5, 0, dtype=torch.int64), 8, 3) is None


def test_negative():
    assert_invalid(routes([[0, 1], [2, -2]]), 4, 2, "negative", 1, 1)
    assert_invalid(routes([[-(2**63), 1]]), 4, 1, "negative", 0, 0)


def test_wide():
    assert_invalid(routes([[0, 1], [4, 2]]), 4, 2, "wide", 1, 0)
    assert_invalid(routes([[2**63 - 1]]), 4, 1, "wide", 0, 0)


def test_dummy():
    assert_invalid(routes([[0, 1], [-1, -1], [-1, 0]]), 4, 1, "dummy", 2, 1)
    # num_tokens = 0: every row is padding.
    assert_invalid(routes([[-1, 3]]), 4, 0, "dummy", 0, 1)


def test_duplicate():
    assert_invalid(routes([[0, 1, 2], [3, -1, 3]]), 4, 2, "duplicate", 1, 2)
    # The first copy is valid; the later one is the violation.
    assert_invalid(routes([[1, 1]]), 4, 1, "duplicate", 0, 1)


def test_repeat_in_padding_row_is_dummy_not_duplicate():
    # The duplicate rule needs t < n, so a padding row's repeated id is dummy.
    assert_invalid(routes([[0, 1, -1], [-1, 2, 2]]), 4, 1, "dummy", 1, 1)
    assert_invalid(routes([[0, 1], [2, 2]]), 4, 1, "dummy", 1, 0)
    # The same row as a real token is a duplicate at the second copy.
    assert_invalid(routes([[0, 1, -1], [-1, 2, 2]]), 4, 2, "duplicate", 1, 2)


def test_negative_beats_wide_and_dummy_on_one_entry():
    # An id < -1 in a padding row: negative, not dummy (dummy needs id >= 0).
    assert_invalid(routes([[0, 1], [-5, -1]]), 4, 1, "negative", 1, 0)


def test_wide_beats_dummy_and_duplicate_on_one_entry():
    # (1, 1) is wide and dummy at once.
    assert_invalid(routes([[0, 1], [-1, 9]]), 4, 1, "wide", 1, 1)
    # (1, 1) is wide and duplicate at once; (1, 0) is earlier and wide.
    assert_invalid(routes([[0, 1], [9, 9]]), 4, 2, "wide", 1, 0)
    assert_invalid(routes([[9, 9]]), 4, 1, "wide", 0, 0)


def test_earlier_entry_wins_regardless_of_kind():
    # duplicate at (0, 1) comes before negative at (1, 0).
    assert_invalid(routes([[2, 2], [-3, 0]]), 4, 2, "duplicate", 0, 1)
    # dummy at (1, 0) comes before wide at (1, 1) and negative at (2, 0).
    assert_invalid(routes([[0, 1], [3, 7], [-9, -1]]), 4, 1, "dummy", 1, 0)
    # Within one row, slot order decides.
    assert_invalid(routes([[1, 8, -2]]), 4, 1, "wide", 0, 1)


def test_error_is_a_value_error_and_pickles():
    err = InvalidRouteError("wide", 3, 1)
    assert isinstance(err, ValueError)
    back = pickle.loads(pickle.dumps(err))
    assert (back.kind, back.token, back.slot, str(back)) == ("wide", 3, 1, str(err))
    with pytest.raises(ValueError) as info:
        InvalidRouteError("bogus", 0, 0)
    assert str(info.value) == (
        "kind must be one of ['negative', 'wide', 'duplicate', 'dummy'], got 'bogus'"
    )


@pytest.mark.parametrize(
    ("topk", "match"),
    [
        (torch.zeros(2, 2, dtype=torch.int32), "topk_idx"),
        (torch.zeros(2, 2, dtype=torch.float32), "topk_idx"),
        (torch.zeros(4, dtype=torch.int64), "topk_idx"),
        (torch.zeros(1, 2, 2, dtype=torch.int64), "topk_idx"),
        ([[0, 1]], "topk_idx"),
    ],
)
def test_bad_topk_idx(topk, match):
    with pytest.raises(ValueError, match=match):
        validate(topk, 4, 1)


@pytest.mark.parametrize("num_experts", [0, -1, 2.0, True, None])
def test_bad_num_experts(num_experts):
    with pytest.raises(ValueError, match="num_experts"):
        validate(routes([[0]]), num_experts, 1)


@pytest.mark.parametrize("num_tokens", [-1, 3, 1.0, None])
def test_bad_num_tokens(num_tokens):
    with pytest.raises(ValueError, match="num_tokens") as info:
        find_invalid(routes([[0], [1]]), 4, num_tokens)
    assert not isinstance(info.value, InvalidRouteError)


def test_argument_errors_are_not_route_errors():
    with pytest.raises(ValueError) as info:
        validate(routes([[-7]]), 0, 1)
    assert not isinstance(info.value, InvalidRouteError)


@settings()
@given(valid_routes())
def test_any_valid_route_validates(case):
    topk_idx, num_experts, num_tokens = case
    assert find_invalid(topk_idx, num_experts, num_tokens) is None
    validate(topk_idx, num_experts, num_tokens)


@settings()
@given(invalid_route_case())
def test_injected_entry_is_reported(case):
    topk_idx, num_experts, num_tokens, kind, token, slot = case
    assert_invalid(topk_idx, num_experts, num_tokens, kind, token, slot)
