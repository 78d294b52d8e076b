# amaranth: UnusedElaboratable=no
"""The throughput bench: measured figures behave as the bus and the codecs say they must."""

import json

import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.flows.throughput import bus_ceiling_gbps, by_frame_length, by_host_bw


def test_bus_ceiling():
    assert bus_ceiling_gbps(64) == pytest.approx(128.0)
    assert bus_ceiling_gbps(1516) == pytest.approx(1516 / 24 * 2)   # 24 beats


@pytest.mark.parametrize("codec,length", [("raw", 1516), ("sign", 308)])
def test_one_lane_runs_at_the_bus_ceiling(codec, length):
    r = by_frame_length(codec, length, frames=4)
    assert r.host_gbps == pytest.approx(r.ceiling_gbps)     # TX never stalls the host side
    if codec == "raw":
        assert r.wire_gbps == pytest.approx(r.host_gbps) and r.ratio == 1.0
    else:
        assert r.ratio > 8 and r.wire_gbps < r.host_gbps / 8


def test_two_generators_keep_their_rate():
    r = by_host_bw(200, "sign", 308, cycles=400, warmup=100)
    assert r.lanes == 2 and r.all_full_rate
    assert r.generator_gbps_min > 90


def test_cli_json_and_errors(capsys):
    assert main(["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw",
                 "none", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by_host_bw"] == [] and out["by_frame_length"][0]["codec"] == "sign"
    assert main(["throughput", "--codecs", "fixed"]) == 2
    assert "--codecs" in capsys.readouterr().err
    assert main(["throughput", "--frame-lengths", "102", "--codecs", "raw", "--host-bw",
                 "none"]) == 2
