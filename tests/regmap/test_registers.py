"""Tests of :mod:`squeezenic_hw.regmap.registers`: building, validation and the emitted files."""

import json
import re

import pytest

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.regmap.plugin import plugin_register_map
from squeezenic_hw.regmap.registers import Register, RegisterMap


def example_map():
    rm = RegisterMap()
    rm.add("ctrl", access="rw", width=8, reset=0x5, doc="control bits", group="global")
    rm.add("go", access="w1p", width=1, doc="start */ now", group="global")
    rm.add("status", access="ro", width=16, doc="a | b", group="global")
    rm.add_counter64("frames", "frames seen", "lane0.tx")
    rm.add("late", access="rw", offset=0x100, doc="after a gap", group="lane0.tx")
    return rm


def test_auto_offsets_and_lookup():
    rm = example_map()
    assert [(r.name, r.offset) for r in rm] == [
        ("ctrl", 0), ("go", 4), ("status", 8), ("frames_lo", 12), ("frames_hi", 16),
        ("late", 0x100)]
    assert rm.next_offset == 0x104
    assert rm["status"].width == 16 and "status" in rm and "nope" not in rm
    assert rm.get("nope") is None and rm.at(12).name == "frames_lo" and rm.at(20) is None
    with pytest.raises(KeyError, match="nope"):
        rm["nope"]
    assert rm.counters == {"frames": (rm["frames_lo"], rm["frames_hi"])}
    assert rm["frames_lo"].counter64 == "frames" and rm["frames_hi"].access == "ro"
    assert rm.size == 0x200 and rm.address_bits == 9
    assert len(rm) == 6
    rm.validate()


def test_size():
    rm = RegisterMap()
    rm.add("a", access="ro")
    assert rm.size == 4 and rm.address_bits == 2
    rm.add("b", access="ro")
    assert rm.size == 8
    rm.add("c", access="ro", offset=0xFFC)
    assert rm.size == 0x1000


def test_json_stable():
    rm = example_map()
    doc = json.loads(rm.to_json())
    assert list(doc) == ["version", "registers", "size"]
    assert doc["version"] == 1 and doc["size"] == 0x200
    for record in doc["registers"]:
        assert list(record) == ["name", "offset", "width", "access", "reset", "doc", "group"]
    assert doc["registers"][0] == {"name": "ctrl", "offset": 0, "width": 8, "access": "rw",
                                   "reset": 5, "doc": "control bits", "group": "global"}
    assert [r["name"] for r in doc["registers"]] == [r.name for r in rm]
    assert rm.to_json() == example_map().to_json()      # deterministic


def test_c_header():
    rm = example_map()
    text = rm.to_c_header()
    assert text.startswith("/*")
    assert "#ifndef SQZ_REGS_H\n#define SQZ_REGS_H\n" in text
    assert text.rstrip().endswith("#endif /* SQZ_REGS_H */")
    defines = dict(re.findall(r"#define (SQZ_\w+)\s+(0x[0-9a-f]+)u", text))
    assert defines == {"SQZ_CTRL": "0x0000", "SQZ_GO": "0x0004", "SQZ_STATUS": "0x0008",
                       "SQZ_FRAMES_LO": "0x000c", "SQZ_FRAMES_HI": "0x0010",
                       "SQZ_LATE": "0x0100", "SQZ_REG_SPACE_SIZE": "0x200"}
    assert "/* rw, 8 bits, reset 0x5: control bits */" in text
    assert "start * / now" in text            # a "*/" in a doc cannot end the comment
    # every comment is closed on its own line
    for line in text.splitlines():
        assert line.count("/*") == line.count("*/") or line.startswith((" *", "/* Byte"))
    assert "#define NIC_CTRL" in rm.to_c_header(prefix="nic")
    with pytest.raises(ValueError, match="prefix"):
        rm.to_c_header(prefix="9x")


def test_markdown():
    text = example_map().to_markdown()
    lines = text.splitlines()
    assert lines[0].startswith("| Offset | Name | Access")
    assert "| 0x0000 | `ctrl` | rw | 8 | 0x5 | global | control bits |" in lines
    assert "a \\| b" in text
    assert sum(1 for line in lines if line.startswith("| 0x")) == 6


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="9lives", access="rw"), "name"),
    (dict(name="has space", access="rw"), "name"),
    (dict(name="_x", access="rw"), "name"),
    (dict(name="x", access="rw", offset=6), "offset 0x6 is not a multiple of 4"),
    (dict(name="x", access="rw", offset=-4), "offset"),
    (dict(name="x", access="rw", offset=1 << 32), "offset"),
    (dict(name="x", access="rw", width=0), "width"),
    (dict(name="x", access="rw", width=33), "width"),
    (dict(name="x", access="rx"), "access"),
    (dict(name="x"), "access is required"),
    (dict(name="x", access="rw", width=4, reset=16), "reset 0x10 does not fit"),
    (dict(name="x", access="rw", reset=-1), "reset"),
    (dict(name="x", access="ro", reset=1), "only 'rw'"),
    (dict(name="x", access="rw", doc=3), "doc"),
])
def test_invalid_register(kwargs, match):
    rm = RegisterMap()
    with pytest.raises(ValueError, match=match):
        rm.add(**kwargs)
    assert len(rm) == 0


def test_duplicates_and_clashes():
    rm = example_map()
    with pytest.raises(ValueError, match="'CTRL'.*duplicate name"):
        rm.add("CTRL", access="rw")                      # same C name
    with pytest.raises(ValueError, match="offset 0x4 already used by 'go'"):
        rm.add("other", access="rw", offset=4)
    with pytest.raises(ValueError, match="counter 'frames'"):
        rm.add_counter64("frames")
    with pytest.raises(ValueError, match="counter 'status'.*clashes"):
        rm.add_counter64("status")
    with pytest.raises(ValueError, match="clashes with 64-bit counter"):
        rm.add("frames", access="rw")
    with pytest.raises(ValueError, match="offset 0x100 already used"):
        rm.add_counter64("bytes", offset=0xFC)          # _hi would land on 'late'
    with pytest.raises(ValueError, match="reserved"):
        rm.add("reg_space_size", access="ro")
    with pytest.raises(ValueError, match="counter name"):
        rm.add_counter64("2x")
    with pytest.raises(ValueError, match="either a Register"):
        rm.add(Register("zz", 0x200), access="rw")
    before = [r.name for r in rm]
    assert before == [r.name for r in example_map()]   # failed additions left no trace
    rm.add(Register("zz", 0x200, access="ro"))
    assert rm["zz"].offset == 0x200


def test_validate_empty():
    with pytest.raises(ValueError, match="no registers"):
        RegisterMap().validate()


def test_register_frozen():
    reg = Register("a", 0)
    with pytest.raises(AttributeError):
        reg.offset = 4
    assert reg.mask == 0xFFFF_FFFF and Register("b", 0, width=3).mask == 7


def test_generator_register_docs_say_what_narrow_lanes_hold():
    """A fixed:8 build's generators send fixed:8, nearest, a power-of-two scale; the
    register docs say so. A sign build holds the codec only; a wide set holds nothing."""
    fixed = plugin_register_map(PluginParams(host_bw=400))
    assert "fixed:8" in fixed["gen_codec"].doc and "8" in fixed["gen_param"].doc
    assert "nearest" in fixed["gen_stochastic"].doc
    assert "power of two" in fixed["gen_scale"].doc
    sign = plugin_register_map(PluginParams(host_bw=3200))
    assert "sign" in sign["gen_codec"].doc and "whatever" not in sign["gen_scale"].doc
    wide = plugin_register_map(PluginParams(host_bw=400, gen_codecs=["fixed:8", "sign"]))
    assert all("whatever" not in wide[f"gen_{n}"].doc for n in ("codec", "param", "scale"))


def test_the_reduce_lane_registers_only_in_a_reduce_build():
    """A ``reduce`` build maps the lane's configuration (every field of ``ReduceConfig``),
    template, table, start and counters from 0x0400; another build maps none of them."""
    from amaranth.lib import data

    from squeezenic_hw.gateware.reduce.layouts import ReduceConfig
    from squeezenic_hw.regmap.plugin import REDUCE_BASE, REDUCE_REGISTERS
    from squeezenic_hw.spec.counters import CONTRIBUTION_COUNTERS, REDUCE_COUNTERS

    rm = plugin_register_map(PluginParams(reduce=["sign"]))
    names = {r.name for r in rm}
    assert {f"reduce_{n}" for n, _, _ in REDUCE_REGISTERS} <= names
    assert {n for n, _, _ in REDUCE_REGISTERS} == {n for n, _ in data.Layout.cast(
        ReduceConfig)}
    assert {f"count_{n}" for n in REDUCE_COUNTERS + CONTRIBUTION_COUNTERS} <= names
    assert rm["reduce_enable"].offset == REDUCE_BASE
    assert rm["reduce_table_write"].access == "w1p"
    assert all(rm[f"reduce_{n}"].width == w for n, w, _ in REDUCE_REGISTERS)
    plain = {r.name for r in plugin_register_map(PluginParams())}
    assert not {n for n in plain if n.startswith(("reduce_", "count_"))}
