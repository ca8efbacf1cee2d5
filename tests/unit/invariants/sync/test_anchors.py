"""Sites declared by anchors (invariants/sync/sites.py, statements.py):
where they resolve, and each way an anchor fails, as the finding of its site."""

from __future__ import annotations

from pathlib import Path

from invariants.sync.finding import Finding
from invariants.sync.sites import Anchor, Group, Scope, parse_tree

TEXT = """\
void f(int* flag, int* data) {
  for (int i = 0; i < 4; ++i)
    data[i] = i;
  do {
    spin();
  } while (load(flag) != 1);
  if (ready(flag)) {
    go();
  } else {
    stop();
  }
  int table[] = {1,
                 2};
  store(flag, 1);  // ; { } in a comment count for nothing
  note("a ; in a string");
}
"""


def tree(tmp_path: Path, text: str = TEXT) -> Path:
    (tmp_path / "k.cuh").write_text(text)
    return tmp_path


def site_at(name: str, at: str, kind: str = "compute") -> Anchor:
    return Anchor(name, "k.cuh", (("kind", kind),), at=at)


def lines_of(root: Path, *anchors: Anchor) -> dict[str, tuple[int, int]]:
    sites, violations = parse_tree(root, anchors)
    assert violations == []
    return {s.name: (s.lines.start, s.lines.stop - 1) for s in sites}


def test_an_at_anchor_is_its_enclosing_statement(tmp_path):
    root = tree(tmp_path)
    found = lines_of(
        root,
        site_at("k.a.for_body", "data[i] = i;"),  # a braceless for: through its `;`
        site_at("k.a.while", "load(flag)"),  # a do's while: the do through its `;`
        site_at("k.a.if", "ready(flag)"),  # an if: through its else's `}`
        site_at("k.a.table", "2}"),  # an initializer: through its `;`
        site_at("k.a.store", "store(flag"),
    )
    found |= lines_of(root, site_at("k.a.do_wait", "spin();"))  # in the do's block: itself
    assert found == {
        "k.a.for_body": (2, 3),
        "k.a.do_wait": (5, 5),
        "k.a.while": (4, 6),
        "k.a.if": (7, 11),
        "k.a.table": (12, 13),
        "k.a.store": (14, 14),
    }


def test_begin_and_end_run_from_the_first_line_of_one_to_the_last_of_the_other(tmp_path):
    root = tree(tmp_path)
    anchor = Anchor(
        "k.a.span",
        "k.cuh",
        (("kind", "release"), ("producers", "block"), ("scope", "gpu"), ("guards", "k.a.data")),
        begin="spin();\n  } while",
        end="go();\n  } else {",
    )
    data = site_at("k.a.data", "data[i] = i;", "store")
    sites, violations = parse_tree(root, (data, anchor))
    assert violations == []
    span = sites[1]
    assert (span.start, span.end, span.anchored) == (4, 10, True)  # lines 5-9, markers outside
    assert (span.producers, span.scope, span.guards) == (Group.BLOCK, Scope.GPU, "k.a.data")
    assert span.where() == f"{root / 'k.cuh'}:5"
    assert span.header() == "@site k.a.span kind=release producers=block scope=gpu guards=k.a.data"


def test_a_primitive_inside_an_anchored_site_is_inside_a_site(tmp_path):
    root = tree(tmp_path, "void f(int* flag) {\n  __threadfence();\n}\n")
    assert len(parse_tree(root)[1]) == 1
    assert parse_tree(root, (site_at("k.a.fence", "__threadfence"),))[1] == []


def problems(root: Path, *anchors: Anchor) -> list[Finding]:
    return parse_tree(root, anchors)[1]


def test_each_anchor_that_cannot_resolve_is_a_finding_of_its_site(tmp_path):
    root = tree(tmp_path)
    path = str(root / "k.cuh")
    twice = site_at("k.a.twice", "flag")
    missing = Anchor("k.a.gone", "k.cuh", (("kind", "store"),), begin="nothing here", end="x")
    backwards = Anchor("k.a.back", "k.cuh", (("kind", "store"),), begin="go();", end="spin();")
    no_file = Anchor("k.a.nofile", "gone.cuh", (("kind", "store"),), at="x")
    assert problems(root, twice, missing, backwards, no_file) == [
        Finding(path, None, "at found 4 times in k.cuh (lines 1, 6, 7, 14)", "k.a.twice"),
        Finding(path, None, "begin found 0 times in k.cuh", "k.a.gone"),
        Finding(path, None, "end comes before begin in k.cuh (line 5, begin at line 8)", "k.a.back"),
        Finding(
            str(root / "gone.cuh"), None, f"file gone.cuh does not exist in {root}", "k.a.nofile"
        ),
    ]


def test_an_overlap_and_a_site_declared_in_the_source_too_are_findings(tmp_path):
    line = "  store(flag, 1);  // ; { } in a comment count for nothing"
    text = TEXT.replace(line, f"  // @site k.a.store kind=store\n{line}\n  // @end k.a.store")
    root = tree(tmp_path, text)
    path = str(root / "k.cuh")
    found = problems(
        root,
        site_at("k.a.if", "ready(flag)"),
        site_at("k.a.go", "go();"),
        site_at("k.a.store", "store(flag"),
    )
    assert found == [
        Finding(path, None, "overlaps site k.a.if (lines 7-11) in k.cuh", "k.a.go"),
        Finding(path, None, f"declared in the source too ({path}:14)", "k.a.store"),
    ]


REPEATED = """\
struct Sync {
  void arrive(int* count) {
    atomicAdd(count, 1);
  }
};
struct Lamport {
  void arrive(int* count) {
    atomicAdd(count, 1);
  }
};
"""


def test_after_tells_a_repeated_statement_apart_by_the_text_before_it(tmp_path):
    root = tree(tmp_path, REPEATED)
    sync = Anchor("k.sync.arrive", "k.cuh", (("kind", "store"),), at="atomicAdd", after="Sync {")
    lamport = Anchor(
        "k.lamport.arrive", "k.cuh", (("kind", "store"),),
        begin="void arrive", end="}", after="struct Lamport",
    )  # fmt: skip
    assert lines_of(root, sync, lamport) == {"k.sync.arrive": (3, 3), "k.lamport.arrive": (7, 9)}


def test_an_after_not_found_once_or_with_nothing_after_it_is_a_finding_of_its_site(tmp_path):
    root = tree(tmp_path, REPEATED)
    path = str(root / "k.cuh")
    twice = Anchor("k.a.twice", "k.cuh", (("kind", "store"),), at="atomicAdd", after="struct")
    nothing = Anchor("k.a.none", "k.cuh", (("kind", "store"),), at="Sync", after="Lamport")
    assert [f for f in problems(root, twice, nothing) if f.site] == [
        Finding(path, None, "after found 2 times in k.cuh (lines 1, 6)", "k.a.twice"),
        Finding(path, None, "at not found after `after` in k.cuh (line 6)", "k.a.none"),
    ]
