"""A release made by a helper the site calls (invariants/sync/contract.py
`Helpers`): on the source, a call in the site to a function of the sources
whose body (or a function it calls) makes a spelled release is that release,
as the PTX sees it once inlined: moving the publish into a helper is no
finding, and weakening the helper's store is one, named by the helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.sync.contract import check_contracts

SOURCE = """\
__device__ void publish(int* flag) { st_release_sys(flag, 1); }
__device__ void publish_twice(int* flag) { publish(flag); publish(flag + 1); }
__global__ void k(int* data, int* flag) {
  // @site k.store kind=store
  data[threadIdx.x] = 1;
  // @end k.store
  // @site k.release kind=release producers=block scope=sys guards=k.store
  __syncthreads();
  if (threadIdx.x == 0) CALL(flag);
  // @end k.release
}
"""


@pytest.fixture
def target(spelled):
    return spelled(
        "helpers",
        barrier={"block": "__syncthreads"},
        release={"sys": "st_release_sys", "gpu": "st_release_gpu"},
    )


def findings(tmp_path: Path, target, source: str) -> list[tuple[int, str]]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cuh").write_text(source)
    report = check_contracts(tmp_path, target, ptx=False)
    return [(v.line, v.message) for v in report.violations]


def test_a_release_in_a_helper_the_site_calls_is_the_sites_release(tmp_path, target):
    assert findings(tmp_path, target, SOURCE.replace("CALL", "publish")) == []


def test_a_helper_of_a_helper_is_followed(tmp_path, target):
    assert findings(tmp_path, target, SOURCE.replace("CALL", "publish_twice")) == []


def test_a_helper_weakened_to_a_narrower_release_is_named(tmp_path, target):
    weakened = SOURCE.replace("CALL", "publish").replace("_sys(flag, 1)", "_gpu(flag, 1)")
    assert findings(tmp_path, target, weakened) == [
        (9, "publish publish is no release at scope sys: it releases at a narrower scope"),
    ]


def test_a_call_to_a_function_that_releases_nothing_is_no_publish(tmp_path, target):
    unrelated = SOURCE.replace("CALL", "note").replace(
        "__device__ void publish(", "__device__ void note(int* flag) {}\n__device__ void publish("
    )
    assert findings(tmp_path, target, unrelated) == [
        (8, "no publish: no st_release_sys in the site"),  # the site, a line lower
    ]
