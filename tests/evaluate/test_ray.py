"""``eval.engine=ray``: evaluator actors on a Ray cluster, the journal on the driver, and a
node that dies losing only its in-flight candidates (kz_core/evaluate/ray_engine.py).

The cluster is a local one started here: a head node without CPUs for actors and two
worker nodes with one CPU each, so each node holds one evaluator actor (CPU lanes under
Triton's interpreter, standing in for one actor per GPU)."""

from __future__ import annotations

import threading

import pytest

from kz_core.evaluate import Evaluator
from kz_core.evaluate.journal import Journal
from kz_core.model import Verdict

from .conftest import eval_config, example_candidates

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture
def cluster():
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20})
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=80 << 20) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster, nodes
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_ray_lanes_give_the_same_verdicts_and_survive_a_lost_node(cluster, example_problems, tmp_path):
    cluster, nodes = cluster
    candidates = example_candidates()[:4]
    config = eval_config("eval.engine=ray", "eval.workers=1", "eval.cache=true")
    with Journal(tmp_path / "journal.sqlite") as journal, Evaluator(example_problems, config, journal=journal) as evaluator:
        assert len(evaluator.lanes) == 2 and all(lane.device.startswith("ray:") for lane in evaluator.lanes)
        assert evaluator.isolation.summary()  # what the actors' sandboxes are
        results = evaluator.evaluate(candidates)
        assert [r.verdict for r in results] == [Verdict.CORRECT] * 4, [r.message for r in results]
        assert all(count > 0 for count in evaluator.lane_counts) and len(journal) == 4  # both actors; one journal, here
        assert evaluator.evaluate(candidates) == results and evaluator.reused == 4

        # A node dies while candidates are in flight: they are evaluated again elsewhere.
        again = [c.__class__(c.problem, c.backend, c.code + "\n# again\n", f"{c.sample_id}-again") for c in candidates]
        done: list = []
        killed = threading.Event()

        def progress(result) -> None:
            done.append(result)
            if not killed.is_set():
                killed.set()
                cluster.remove_node(nodes[1])

        later = evaluator.evaluate(again, progress=progress)
        assert killed.is_set() and [r.verdict for r in later] == [Verdict.CORRECT] * 4, [r.message for r in later]
        assert sum(1 for lane in evaluator.lanes if lane.lost) <= 1 and len(journal) == 8


def test_kz_check_with_the_ray_engine_compiles_here(cluster, example_problems):
    """Nothing runs in a check, so no actor is needed for it: the driver compiles."""
    config = eval_config("eval.engine=ray", "eval.workers=1")
    with Evaluator(example_problems, config) as evaluator:
        checked = evaluator.check(example_candidates()[:2])
    assert [c.status for c in checked] == ["compiled", "compiled"], [c.message for c in checked]
