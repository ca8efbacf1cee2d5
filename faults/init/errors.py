"""init's errors: bad input said in one line naming it (the tool exits 2)."""

from faults.catalog.errors import FaultsError


class InitError(FaultsError):
    """A spelling, a sources path or an output init cannot take."""
