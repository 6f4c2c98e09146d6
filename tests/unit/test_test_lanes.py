"""`make test` runs the local node's lane as one unit of pytest-xdist work and every
other module as a unit of its own (tests/conftest.py): a module outside tests/pods that starts a
node or changes the host's network as the node does must be in the node's lane, or
it would run beside the node and fight over the bridge, its addresses and its rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import NODE_LANE, NODE_LANE_MODULES, lane_of

TESTS = Path(__file__).resolve().parents[1]
# What starts a node or touches the host's network namespaces, bridge or rules.
NODE_SIGNS = re.compile(r"local_cluster|hostnet|\"--node\"|netns|NODE=1")


def test_every_module_that_starts_a_node_or_changes_the_hosts_network_is_in_its_lane() -> None:
    found = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if path.parent.name != "pods" and NODE_SIGNS.search(path.read_text())
    }
    found.discard(Path(__file__).relative_to(TESTS).as_posix())
    assert found == NODE_LANE_MODULES


@pytest.mark.parametrize(
    ("nodeid", "lane"),
    [
        ("tests/pods/test_chart_in_pods.py::test_the_release_runs", NODE_LANE),
        ("tests/pods/test_image.py::test_runs[product]", NODE_LANE),
        ("tests/integration/test_devcluster.py::test_up", NODE_LANE),
        ("tests/integration/test_chart.py::test_x[a/b::c]", "integration/test_chart.py"),
        ("tests/unit/test_cron.py::test_y", "unit/test_cron.py"),
    ],
)
def test_a_module_is_a_unit_of_its_own_unless_it_belongs_to_the_nodes_lane(
    nodeid: str, lane: str
) -> None:
    assert lane_of(nodeid) == lane
