"""skip-wait: the wait at a site removed (its loop gone), so the consumer reads at once."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=1,
    word="skip-wait",
    does="the site's wait is skipped: its consumer reads what it guards at once",
    made=Made.SITE_ACTION,
)
