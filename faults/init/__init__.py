"""init: a source tree scanned for ordering primitives, its sites proposed
as anchors, and a starter catalog and harness skeleton written, so that
onboarding a codebase starts from a draft (docs/tools.md, "Onboarding a codebase")."""

from faults.init.defaults import CONTRACT_KEYS
from faults.init.errors import InitError
from faults.init.harness import harness_skeleton
from faults.init.propose import (
    Proposal,
    Unproposed,
    declared_sites,
    propose,
    proposed,
    undeclared,
    unproposed,
)
from faults.init.scan import Form, Scan, Use, scan
from faults.init.starter import starter_catalog

__all__ = [
    "CONTRACT_KEYS",
    "Form",
    "InitError",
    "Proposal",
    "Scan",
    "Unproposed",
    "Use",
    "declared_sites",
    "harness_skeleton",
    "propose",
    "proposed",
    "scan",
    "starter_catalog",
    "undeclared",
    "unproposed",
]
