"""Register scripts as text (``sim/core_script.py``) and the reference check of a core
run's output streams (``core_model.check_outputs``), without simulating."""

import struct

import numpy as np
import pytest

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.regmap.plugin import plugin_register_map
from squeezenic_hw.sim import core_model as cm
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.core_script import parse_register_script, register_name

from support.lane_scenarios import host_stream

GEN = PluginParams(host_bw=200, codecs=["sign"], gen_codecs=["sign"], loopback=True)
TWO = PluginParams(num_intf=2, codecs=["raw", "sign"])


def test_every_step_by_name_and_by_address():
    rm = plugin_register_map(GEN)
    text = """
        # a comment, and a blank line above
        write gen_start 1
        WRITE 0x100 0x2        # by address, any case
        read lane0_chk_frames_lo
        wait 1000
        poll lane0_frames_sent 3
        poll lane1_frames_sent 0x3 25
        inputs-done
        frames c2h0 12
    """
    assert parse_register_script(text, GEN, looped=True) == [
        cm.write(rm["gen_start"].offset, 1), cm.write(0x100, 2),
        cm.read(rm["lane0_chk_frames_lo"].offset), cm.wait(1000),
        cm.poll(rm["lane0_frames_sent"].offset, 3), cm.poll(rm["lane1_frames_sent"].offset, 3, 25),
        cm.inputs_done(), cm.output_frames(0, 12)]
    # streams are indices of core_streams: tx1 is output 3 of two interfaces
    assert parse_register_script("frames tx1 2", TWO) == [cm.output_frames(3, 2)]
    assert register_name(rm, 0x100) == "gen_start" and register_name(rm, 0x9990) == "0x9990"


@pytest.mark.parametrize("line,message", [
    ("jump 3", "unknown step 'jump' (one of write, read, wait, poll, inputs-done, frames)"),
    ("write gen_start", "write takes 2 argument(s): write REGISTER VALUE"),
    ("read", "read takes 1 argument(s): read REGISTER"),
    ("poll gen_start 1 2 3", "poll takes 3 argument(s)"),
    ("inputs-done now", "inputs-done takes 0 argument(s)"),
    ("read gen_strat", "no register 'gen_strat' in this build"),
    ("read 0x102", "address 0x102 is not a 32-bit word address"),
    ("wait -5", "'-5' is negative"),
    ("wait soon", "'soon' is not a number"),
    ("frames tx0 1", "no output stream 'tx0' (this run has c2h0)"),
    ("write scratch 0x100000000", "b of a write step must be an int in 0..2**32-1"),
])
def test_errors_name_the_line(line, message):
    with pytest.raises(ValueError) as info:
        parse_register_script(f"read scratch\n\n{line}\n", GEN, looped=True)
    assert str(info.value).startswith("line 3: ") and message in str(info.value)


def _generator_frame(wire_frame, lane):
    """A wire frame with a generator lane's UDP source port (what the splitter and the
    check tell apart)."""
    frame = bytearray(wire_frame)
    struct.pack_into("!H", frame, 34, GEN.src_port_base + lane)
    return bytes(frame)


def _frames(data):
    return [AxisFrame(d) for d in data]


def test_tx_with_generator_frames_and_rx_checks():
    host = host_stream(np.random.default_rng(1), "sign", n_total=400, max_k=90,
                       flush_rate=1.0)
    wire = lr.tx(host, codecs=["sign"])[0]
    assert len(wire) >= 3
    gen = [_generator_frame(wire[0], k) for k in range(2)]
    tx0 = [gen[0], wire[0], wire[1], gen[1], *wire[2:]]
    back = lr.rx(wire, codecs=["sign"])[0]
    inputs = {"h2c0": host, "rx0": [gen[1], *wire, gen[0]]}
    # the generators' frames are set aside on the wire out and (loopback) on the wire in
    ok = cm.check_outputs(GEN, inputs, [], {"tx0": _frames(tx0), "c2h0": _frames(back)})
    assert ok == {"tx0": (True, None), "c2h0": (True, None)}
    # a host wire frame missing, or one byte changed
    short = cm.check_outputs(GEN, inputs, [], {"tx0": _frames(tx0[:-1]),
                                               "c2h0": _frames(back)})["tx0"]
    assert short == (False, f"{len(wire) - 1} frames, reference {len(wire)} (an open wire "
                            "frame waits for tx_close, a flush or the idle timeout)")
    bent = bytearray(back[1])
    bent[70] ^= 1
    bad = cm.check_outputs(GEN, inputs, [], {"tx0": _frames(tx0),
                                             "c2h0": _frames([back[0], bytes(bent)])})
    assert bad["c2h0"] == (False, f"frame 1: {len(bent)} bytes, reference {len(bent)}, "
                                  "first difference at byte 70")


def test_what_the_reference_cannot_say():
    rm = plugin_register_map(TWO)
    outputs = {name: [] for name in cm.core_streams(TWO)[1]}
    port = [cm.write(rm["udp_port"].offset, 4000)]
    assert {v for v in cm.check_outputs(TWO, {}, port, outputs).values()} == \
        {(None, "the script writes enable/udp_port/idle_timeout")}
    timed = PluginParams(num_intf=2, codecs=["raw"], idle_timeout=100)
    checks = cm.check_outputs(timed, {}, [cm.read(0)], outputs)
    assert checks["tx1"] == (None, "the build's idle timeout depends on cycle times")
    assert checks["c2h1"] == (True, None)
    # looped, generators without loopback lanes: their frames reach the host RX lane
    tx_only = PluginParams(host_bw=200, codecs=["sign"])
    checks = cm.check_outputs(tx_only, {}, [], {"c2h0": []}, looped=True)
    assert checks["c2h0"] == (None, "the generators' frames reach this lane")
