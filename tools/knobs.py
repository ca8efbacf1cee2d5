"""python -m tools.knobs: the `AFDEP_*` knobs of this environment checked
(afdep/config.py's KNOBS, by environment_error): nothing said and exit 0
when each is known and takes its value, else the reason, naming the knob, in
one line on stderr and exit 2. The fault engine runs it before any work of
every command where an `AFDEP_*` variable is set (catalogs/afdep.toml's
[target.knobs]; docs/catalog.md, "Knobs"); the line is the engine's to lead,
so it carries no program name."""

from __future__ import annotations

import sys

from afdep.config import environment_error


def main() -> int:
    problem = environment_error()
    if problem is None:
        return 0
    print(problem, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
