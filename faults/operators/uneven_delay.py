"""uneven-delay: some of a publishing group's threads delayed before their stores."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=3,
    word="uneven-delay",
    does="the publishing group's producers other than the publisher are delayed before their "
    "stores: a missing barrier lets the flag out first",
    made=Made.EXPOSE,
)
