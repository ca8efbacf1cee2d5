"""skip-release: the release at a site removed, so its consumers wait in vain."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=14,
    word="skip-release",
    does="the site's release is skipped: its consumers wait until they time out",
    made=Made.SITE_ACTION,
)
