"""forced-order: the producers wait for the publisher's release before their stores."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=4,
    word="forced-order",
    does="the publishing group's other producers wait (bounded) until the publisher has "
    "released: a missing barrier lets the flag out before their data every time",
    made=Made.EXPOSE,
)
