# amaranth: UnusedElaboratable=no
"""Tests of :func:`~squeezenic_hw.sim.reduce_ring.run_ring`, the ring of simulated NICs that
``squeezenic-hw allreduce`` runs: every host's result, every link's frames and the
figures, against the numpy reference, with random gaps on the links and idle hosts."""

import numpy as np
import pytest

from squeezenic_hw.reference.allreduce import allreduce
from squeezenic_hw.sim.compiled import compiled_available
from squeezenic_hw.sim.reduce_ring import run_ring

from support.reduce_frames import by_chunk_and_phase


@pytest.mark.parametrize("codec, nodes, elements, settings", [
    ("sign", 3, 500, {"scale": 0.5, "aux": -0.25}),
    pytest.param("qsgd", 3, 400, {"param": 4, "scale": 3.0, "aux": 1 / 3, "stochastic": True},
                 marks=pytest.mark.slow),
])
def test_a_ring_with_gaps_and_idle_hosts(codec, nodes, elements, settings):
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    run = run_ring(xs, codec, seed=7, mtu=200, max_host_elements=40, link_gap=0.2,
                   idle=0.2, rng_seed=1, **settings)
    ref = allreduce(xs, codec, seed=7, mtu=200, **settings)
    for r in range(nodes):
        assert run.results[r].view(np.uint32).tolist() == ref.results[r].view(np.uint32).tolist()
        assert by_chunk_and_phase(run.links[r]) == by_chunk_and_phase(ref.links[r])
        assert run.host_other[r] == run.bypass[r] == []
        assert run.counters[r]["reduce_taken"] == len(ref.links[(r - 1) % nodes])
        assert run.counters[r]["overflows"] == 0
    assert all(run.complete)
    assert 0 < run.hop_latency < run.cycles
    assert run.stream_beats["link"] == max(
        sum(-(-len(f) // 64) for f in link) for link in ref.links)


@pytest.mark.skipif(not compiled_available(), reason="no Verilator or C++ compiler here")
def test_the_compiled_ring_gives_the_same_frames():
    """One Verilator model of the lane per node (the C++ bench joins them): the results,
    links and counters of the reference, with gaps on the links and idle hosts, for a
    tensor of several rounds of MTU-long frames on four nodes (where each gather is
    forwarded twice: nodes forwarding to each other must not all wait on one another)."""
    rng = np.random.default_rng(5)
    nodes, elements = 4, 20_000
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    settings = {"scale": 0.5, "aux": -0.25}
    compiled = run_ring(xs, "sign", backend="compiled", seed=7, link_gap=0.1, idle=0.1,
                        rng_seed=2, **settings)
    ref = allreduce(xs, "sign", seed=7, **settings)
    for r in range(nodes):
        assert compiled.results[r].view(np.uint32).tolist() == \
            ref.results[r].view(np.uint32).tolist()
        assert by_chunk_and_phase(compiled.links[r]) == by_chunk_and_phase(ref.links[r])
        assert compiled.host_other[r] == compiled.bypass[r] == []
        assert compiled.counters[r]["reduce_taken"] == len(ref.links[(r - 1) % nodes])
        assert compiled.counters[r]["overflows"] == 0
    assert all(compiled.complete) and 0 < compiled.hop_latency < compiled.cycles


def test_only_the_integer_codecs():
    with pytest.raises(ValueError, match="codec"):
        run_ring([np.zeros(4, np.float32)] * 2, "raw")
