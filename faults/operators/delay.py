"""delay: a bounded delay at a site, which a correct protocol must tolerate."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=2,
    word="delay",
    does="the site runs late by a bounded delay: a correct protocol passes under any timing",
    made=Made.SITE_ACTION,
)
