"""What one run did, as the verdict reads it: its exit, whether the outer
timeout ended it, the failure lines its log named, the markers of each fault,
the digests it printed, and its log (faults/pipeline/parse.py reads a log
into one)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Outcome:
    exit_code: int | None
    outer_timeout: bool
    wall_s: float
    mismatches: int
    timeout_lines: int
    assertion_lines: int
    device_errors: int = 0  # lines naming a device fault (a trap, an illegal address)
    markers: dict[str, int] = field(default_factory=dict)
    digests: list[str] = field(default_factory=list)
    log_path: str = ""
    log_sha256: str = ""
    timeout_s: float | None = None  # the outer timeout the run ran under

    @property
    def detected(self) -> bool:
        """Did the run name a failure (not merely exit non-zero)?"""
        return bool(
            self.mismatches or self.timeout_lines or self.assertion_lines or self.device_errors
        )

    def named_failures(self) -> str:
        """What the log named, e.g. `8 mismatch lines, 1 device error line`."""
        counts = (
            (self.mismatches, "mismatch"),
            (self.timeout_lines, "timeout"),
            (self.assertion_lines, "assertion"),
            (self.device_errors, "device error"),
        )
        return ", ".join(
            f"{count} {what} line{'s' if count > 1 else ''}" for count, what in counts if count
        )

    def to_dict(self) -> dict:
        return asdict(self)
