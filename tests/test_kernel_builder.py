"""The KernelBuilder seam: what the measurer receives of a space, across processes, with records keyed as before."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from fakes import SYMBOLIC_CPU

from tensorgym.measure import Measurer
from tensorgym.measure.runner import Runner
from tensorgym.measure.worker import Outcome
from tensorgym.spaces import KernelBuilder, Space, SpaceError
from tensorgym.spaces.mapping import MappingSpace
from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, MicrokernelSpace, enumerate_microkernels
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import conv2d, matmul

TARGET = local_cpu()


def _spaces() -> dict[str, Space]:
    rules = EnumerationRules.for_target(TARGET, quick=True)
    catalogue = Catalogue.unmeasured(TARGET, enumerate_microkernels(rules), rules=rules)
    return {
        "tiles": TilesSpace(matmul(32, 32, 16), TARGET),
        "tiles-packed": TilesSpace(conv2d(1, 32, 7, 7, 32, 3, 3), TARGET, packing="weights"),
        "microkernel": MicrokernelSpace(conv2d(1, 4, 14, 14, 32, 3, 3), TARGET, catalogue=catalogue,
                                        packing="all"),
        "mapping": MappingSpace(matmul(32, 64, 32), TARGET),
    }


@pytest.mark.parametrize("name", ["tiles", "tiles-packed", "microkernel", "mapping"])
def test_a_builder_pickles_with_its_space_and_gives_the_same_arguments(name):
    space = _spaces()[name]
    config = space.sample(np.random.default_rng(0))
    builder = space.builder()
    assert isinstance(builder, space.builder_class) and builder.space is space
    assert builder.workload == space.workload and builder.target == space.target
    again = pickle.loads(pickle.dumps(builder))  # what a build or run worker receives
    assert type(again) is type(builder) and again.space.name == space.name and again.space.is_valid(config)
    inputs = space.workload.random_inputs(0)
    for a, b in zip(builder.kernel_arguments(config, inputs), again.kernel_arguments(config, inputs)):
        np.testing.assert_array_equal(a, b)
    out = builder.kernel_arguments(config, inputs)
    assert builder.canonical_output(config, out).shape == space.workload.output_shape


def test_a_builder_checks_configs_and_a_cpu_builder_makes_no_cuda_kernel():
    space = TilesSpace(matmul(32, 32, 16), SYMBOLIC_CPU)
    config = space.sample(np.random.default_rng(1))
    with pytest.raises(SpaceError):
        space.builder().kernel_arguments(config.replace(unroll=5), [np.zeros(s, "float32")
                                                                   for s in space.workload.input_shapes])
    with pytest.raises(NotImplementedError, match="not CUDA kernels"):
        space.builder().cuda_kernel(config)


def test_a_space_without_a_builder_says_so():
    class Geometry(TilesSpace):
        builder_class = None

    with pytest.raises(SpaceError, match="builds no kernels"):
        Geometry(matmul(32, 32, 16), SYMBOLIC_CPU).builder()


class RecordingRunner(Runner):
    """Answers every kernel with one fake sample, and keeps what it was handed."""

    def __init__(self):
        super().__init__(TARGET)
        self.handed: list = []

    def run(self, builder, config, artifact, *, check, timeout, fault=None, incumbent_s=None):
        self.handed.append(builder)
        return Outcome("ok", value={"status": "ok", "samples": [1e-3], "number": 1})


def test_the_measurer_hands_builders_to_its_runner_and_keys_records_by_the_space():
    space = TilesSpace(matmul(16, 16, 16), TARGET)
    configs = space.sample_many(np.random.default_rng(2), 2)
    runner = RecordingRunner()
    with Measurer(runner=runner, builders=1) as measurer:
        records = measurer.measure(space, configs)
    assert all(isinstance(b, KernelBuilder) and b.space is space for b in runner.handed)
    assert len(runner.handed) == 2 and runner.handed[0] is runner.handed[1]  # one builder per space and batch
    for config, record in zip(configs, records):
        assert record.ok and record.space == "tiles" and record.config == config
        assert record.workload == space.workload.key and record.target == TARGET.fingerprint
