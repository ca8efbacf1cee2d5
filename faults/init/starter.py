"""The starter catalog init prints: [target] with placeholders and what to
fill in, [target.log] for the harness skeleton, [target.contract] with the
spellings the scan found, [target.bound] and [target.identity] commented, a [[target.site]] per
proposal (its file:line and code in a comment), one [[config]], [generate],
and a first fault (docs/tools.md, "Onboarding a codebase")."""

from __future__ import annotations

import json
from collections.abc import Sequence

from faults.init.harness import LOG_PATTERNS
from faults.init.propose import Proposal, Unproposed
from faults.init.scan import Scan
from invariants.sync.sites import SiteKind

HEADER = """\
# The starter catalog of {name}, written by `{program} init {sources}`
# (docs/tools.md, "Onboarding a codebase"). Fill in every TODO, check each
# proposed site (its kind, its producers or consumers, its scope, and the
# store site it guards), then:
#   {program} --catalog {name}.toml sites --check {sources}
#   {program} --catalog {name}.toml sweep

[target]
name = {name_s}
sources = {sources_s}  # the tree scanned, from the project's root
language = "cuda"
clock = "TODO_nanoseconds()"  # TODO: a device expression giving nanoseconds (a %globaltimer read)
rank = "TODO_rank"  # TODO: the expression naming the rank inside a kernel
gpus = 1
timeout_s = 120  # TODO: a few times the longest clean run
# TODO: build the harness (harness.cu, written beside this catalog) against the tree.
build = ["nvcc", "-O2", "-std=c++17", "-arch=native", "-DSOURCE_DIGEST=\\"{{digest}}\\"",
         "-I{{tree}}/{sources}", "{{tree}}/harness.cu", "-o", "{{out}}/harness"]
run = ["{{out}}/harness", "--ranks", "2"]

# What the harness prints (harness.cu prints exactly these).
[target.log]
"""

BOUND = """
# A wait that can spin forever, bounded by the engine (docs/catalog.md):
# [target.bound]
# loop = 'while \\s*\\((?P<cond>[^;]*)\\)'  # a spin loop; `cond` its condition
# limit_ns = 2_000_000_000
# expired = 'printf("timeout: site={site}\\n"); __trap();'  # what runs past the limit

# Or no harness: `run` the project's own test, pointed at {tree}, and no build
# (docs/targets.md, "Their tests as the harness"); the tree then says its digest:
# [target.identity]
# file = "TODO.cuh"  # under the sources
# before = "TODO: text of one line every run executes"
# say = 'TODO: statements that print the digest line once, with {digest}'
"""

TAIL = """
# One run of the harness; add a config per rank split, size and mode it runs.
[[config]]
name = "default"
args = []

# Faults generated from the sites: a delay this long must expose a missing wait.
[generate]
ns = 2_000_000
"""


def toml_string(text: str) -> str:
    """A TOML string of `text`: literal when it can be, else basic with escapes."""
    if "'" not in text and "\n" not in text and all(ch >= " " for ch in text):
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def starter_catalog(
    scan: Scan,
    proposals: list[Proposal],
    name: str,
    sources: str,
    program: str = "python -m faults",
    skipped: int = 0,
    unproposed: Sequence[Unproposed] = (),
) -> str:
    """The catalog's text (`program`: the command its comments say to run;
    `skipped`: how many proposals were left out over the tree's own sites;
    `unproposed`: each use no proposed site holds, listed with why)."""
    text = HEADER.format(
        name=name,
        sources=sources,
        name_s=toml_string(name),
        sources_s=toml_string(sources),
        program=program,
    )
    text += "".join(f"{key} = {toml_string(value)}\n" for key, value in LOG_PATTERNS.items())
    text += contract(scan) + BOUND
    if skipped:
        text += (
            f"\n# {skipped} proposed sites left out: they overlap sites the sources\n"
            "# already declare with `// @site` comments.\n"
        )
    if unproposed:
        text += (
            f"\n# Not proposed: {len(unproposed)} of the {len(scan.uses)} ordering uses found, "
            "each with why.\n# `sites --check` names those its rules need inside a site; "
            "the rest stay as they are.\n"
        )
        text += "".join(f"#   {entry.said()}\n" for entry in unproposed)
    for proposal in proposals:
        text += site_table(scan, proposal)
    return text + TAIL + first_fault(proposals)


def contract(scan: Scan) -> str:
    lines = [
        "\n# How the sources spell what the publish contract looks for",
        "# (docs/synchronization.md, \"The publish contract\"), as the scan found them.",
        "[target.contract]",
    ]
    for helper in scan.helpers.values():
        lines.append(
            f"# {helper.name} ({helper.path}:{helper.line}) wraps {helper.why}: "
            f"reads as {helper.reading.key}"
            + (" (volatile: relaxed)" if helper.reading.volatile else "")
        )
    for key in sorted(scan.spellings):
        lines.append(f"{key} = {toml_string('|'.join(scan.spellings[key]))}")
    if not scan.spellings:
        lines.append("# TODO: no call spelling found; name the release, acquire and barrier calls")
    return "\n".join(lines) + "\n"


def site_table(scan: Scan, proposal: Proposal) -> str:
    source = scan.files[proposal.path].text.split("\n")
    said = source[proposal.line - 1].strip()
    head = [f"\n# {proposal.path}:{proposal.line}: {said}"]
    head += [f"# {note}" for note in proposal.notes]
    body = [f"name = {toml_string(proposal.name)}", f"file = {toml_string(proposal.path)}"]
    if proposal.after is not None:
        body.append(f"after = {toml_string(proposal.after)}")
    if proposal.at is not None:
        body.append(f"at = {toml_string(proposal.at)}")
    else:
        body += [f"begin = {toml_string(proposal.begin or '')}"]
        body += [f"end = {toml_string(proposal.end_text or '')}"]
    body.append(f'kind = "{proposal.kind.value}"')
    if proposal.kind is not SiteKind.STORE:
        role = "producers" if proposal.kind is SiteKind.RELEASE else "consumers"
        body.append(f'{role} = "{proposal.group.value}"')
        body.append(f'scope = "{proposal.scope.value}"')
        if proposal.guards is None:
            body.append('guards = "TODO"  # TODO: the store or compute site this one guards')
        elif proposal.kind is SiteKind.WAIT:
            body.append(f'guards = "{proposal.guards}"  # TODO: a guess: the site it awaits')
        else:
            body.append(f'guards = "{proposal.guards}"')
    if not proposal.anchored:
        head.append(
            "# its text repeats in the file, another copy before it: no anchor finds it; "
            "declare it by hand"
        )
        body = [f"# {line}" for line in body]
        return "\n".join([*head, "# [[target.site]]", *body]) + "\n"
    return "\n".join([*head, "[[target.site]]", *body]) + "\n"


def first_fault(proposals: list[Proposal]) -> str:
    """A first hand-written fault (a catalog holds one at least): the first
    release delayed must still pass."""
    releases = [p for p in proposals if p.kind is SiteKind.RELEASE and p.anchored]
    target = (releases or [p for p in proposals if p.anchored] or [None])[0]
    lines = [
        "",
        "# A first fault of your own (the generated ones join it); the control's",
        "# patches force a failure the sweep must see. TODO: a patch that corrupts one",
        "# word of the output, e.g. { file = \"...\", old = \"...\", new = \"...\" }.",
        "[control]",
        "patches = []",
        "",
    ]
    site = target.name if target else "TODO"
    fault = [
        "[[fault]]",
        'id = "D1"',
        f'title = "delay {site}: a late release must still pass"',
        'expect = "pass"',
        f'patches = [{{ site = "{site}", action = "delay", ns = 1_000_000 }}]',
    ]
    return "\n".join(lines + fault) + "\n"
