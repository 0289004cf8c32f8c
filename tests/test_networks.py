"""Networks as data: the built-in networks' counts, networks of your own, the objective."""

from __future__ import annotations

import json

import pytest

from tensorgym.errors import InvalidArgumentError, UnknownNameError
from tensorgym.networks import NETWORKS, Network, load_network, network, resolve_network
from tensorgym.suites import SUITES
from tensorgym.workloads import conv2d, matmul


def _weights(name: str) -> dict[str, float]:
    return {t.workload.name: t.weight for t in NETWORKS[name].tasks}


def test_resnet18_counts_are_its_20_convolutions_and_c2_does_not_occur():
    weights = _weights("ResNet-18")
    assert weights == {"C0": 1, "C1": 4, "C2": 0, "C3": 1, "C4": 1, "C5": 3, "C6": 1, "C7": 1, "C8": 3, "C9": 1,
                       "C10": 1, "C11": 3}
    assert sum(weights.values()) == 20
    assert "does not occur" in NETWORKS["ResNet-18"].tasks[2].note
    # Stride-2 3x3 convs and their 1x1 projections open stages 2-4 once each.
    for task in NETWORKS["ResNet-18"].tasks:
        if task.workload.stride == 2 and task.workload.R in (1, 3):
            assert task.weight == 1


def test_resnet50_v1_counts():
    weights = _weights("ResNet-50")
    assert all(w > 0 for w in weights.values())  # all 13 occur in v1
    assert weights["R2"] + weights["R5"] + weights["R8"] + weights["R11"] == 3 + 4 + 6 + 3  # one 3x3 per block
    assert weights["R3"] == 4  # 3 expands + the stride-1 projection of stage 1
    assert [weights[k] for k in ("R4", "R7", "R10")] == [1, 1, 1]  # the strided 1x1 reduce of v1
    assert sum(weights.values()) == 38


def test_yolo9000_is_darknet19_at_544_and_y6_does_not_occur():
    weights = _weights("YOLO-9000")
    assert weights == {"Y0": 1, "Y1": 1, "Y2": 2, "Y3": 1, "Y4": 2, "Y5": 1, "Y6": 0, "Y7": 3, "Y8": 2, "Y9": 3,
                       "Y10": 2}


def test_bert_base_runs_only_the_ffn_shapes_of_the_suite():
    weights = _weights("BERT-base")
    assert weights == {"M0": 0, "M1": 0, "M2": 0, "M3": 12, "M4": 0, "M5": 12}


def test_built_in_networks_are_the_seed_suites():
    suites = {"ResNet-18": "ResNet-18", "ResNet-50": "ResNet-50", "YOLO-9000": "YOLO-9000", "BERT-base": "BERT"}
    for name, suite in suites.items():
        assert NETWORKS[name].workloads == SUITES[suite].layers


@pytest.mark.parametrize("name", ["ResNet-18", "resnet18", "Network-ResNet18-v0", "RESNET-18"])
def test_lookup_by_any_spelling(name):
    assert network(name) is NETWORKS["ResNet-18"]


def test_unknown_network_suggests_one():
    with pytest.raises(UnknownNameError, match="did you mean 'ResNet-50'"):
        network("ResNet-51")


def test_estimate_is_the_weighted_sum_over_live_tasks():
    net = NETWORKS["ResNet-18"]
    latencies = [float(i + 1) for i in range(len(net.tasks))]
    expected = sum(t.weight * lat for t, lat in zip(net.tasks, latencies))
    assert net.estimate(latencies) == pytest.approx(expected)
    latencies[2] = None  # C2 has weight 0: it does not matter
    assert net.estimate(latencies) == pytest.approx(expected)
    latencies[0] = None
    assert net.estimate(latencies) is None


def test_a_network_of_your_own_in_python():
    net = Network.from_pairs("mine", [(matmul(64, 64, 64), 3), (conv2d(1, 8, 16, 16, 16, 3, 3), 1.5)])
    assert net.weights == (3, 1.5) and net.live_tasks == (0, 1)
    assert Network.from_json(json.loads(json.dumps(net.to_json()))) == net


@pytest.mark.parametrize("pairs, message", [
    ([], "no layers"),
    ([(matmul(8, 8, 8), -1)], "non-negative"),
    ([(matmul(8, 8, 8), 0)], "no layer with a positive count"),
    ([(matmul(8, 8, 8), 1), (matmul(8, 8, 8), 2)], "twice"),
    ([("matmul", 1)], "Workload"),
    ([(matmul(8, 8, 8),)], "pairs"),
])
def test_bad_networks_are_refused(pairs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Network.from_pairs("bad", pairs)


def test_networks_from_json_and_toml_files(tmp_path):
    (tmp_path / "net.json").write_text(json.dumps({"name": "mine", "layers": [
        {"op": "conv2d", "C": 64, "H": 56, "F": 64, "R": 3, "count": 4, "name": "c3"},
        {"op": "matmul", "M": 512, "N": 768, "K": 3072, "count": 12}]}))
    (tmp_path / "net.toml").write_text('name = "mine"\n[[layers]]\nop = "conv2d"\nC = 64\nH = 56\nF = 64\nR = 3\n'
                                       'count = 4\nname = "c3"\n[[layers]]\nop = "matmul"\nM = 512\nN = 768\n'
                                       'K = 3072\ncount = 12\n')
    a, b = load_network(tmp_path / "net.json"), resolve_network(str(tmp_path / "net.toml"))
    assert a.workloads == b.workloads and a.weights == b.weights == (4, 12)
    assert a.tasks[0].workload == conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1)
    assert a.tasks[1].label == "mine/L1"


@pytest.mark.parametrize("layers, message", [
    ([{"op": "conv2d", "C": 64, "H": 56, "F": 64, "count": 1}], "missing R"),
    ([{"op": "matmul", "M": 8, "N": 8, "K": 8}], "count"),
    ([{"op": "matmul", "M": 8, "N": 8, "K": 8, "count": 1, "Q": 2}], "unknown field"),
    ([{"op": "pool", "count": 1}], "'op' must be"),
    ([{"op": "matmul", "M": 0, "N": 8, "K": 8, "count": 1}], "M must be >= 1"),
])
def test_bad_network_files_name_the_layer(tmp_path, layers, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"layers": layers}))
    with pytest.raises(InvalidArgumentError, match=message) as info:
        load_network(path)
    assert "layer 1" in str(info.value)


def test_not_json_is_a_clear_error(tmp_path):
    path = tmp_path / "net.json"
    path.write_text("layers: [1]")
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        load_network(path)


def test_with_dtype_refuses_what_workloads_refuse():
    with pytest.raises(InvalidArgumentError, match="int4"):
        NETWORKS["ResNet-18"].with_dtype("int4")
    assert NETWORKS["ResNet-18"].with_dtype("float32") == NETWORKS["ResNet-18"]
