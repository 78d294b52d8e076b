"""OpenNIC's AXI4-Lite subset: 32-bit address and data, no ``wstrb``, no ``prot``.

:func:`AxiLiteSignature` is seen from the master, so a slave port is
``"axil": In(AxiLiteSignature())`` and a master port ``Out(AxiLiteSignature())``.
Every handshake follows AXI: a transfer happens in a cycle where ``*valid`` and
``*ready`` are both high; a master must not wait for ``*ready`` before raising
``*valid``; once raised, ``*valid`` and its payload stay put until the transfer.
"""

from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXIL_ADDR_WIDTH", "AXIL_DATA_WIDTH", "AxiResp", "AxiLiteSignature",
           "AXIL_SLAVE_PORTS", "connect_flat_slave"]

AXIL_ADDR_WIDTH = 32
AXIL_DATA_WIDTH = 32


class AxiResp(enum.Enum, shape=2):
    """``bresp``/``rresp`` codes (OpenNIC's slaves use OKAY and SLVERR)."""
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


def AxiLiteSignature():
    """The OpenNIC AXI-Lite bus, from the master's side.

    Members: ``awvalid``, ``awaddr[31:0]``, ``awready``, ``wvalid``, ``wdata[31:0]``,
    ``wready``, ``bvalid``, ``bresp[1:0]``, ``bready``, ``arvalid``, ``araddr[31:0]``,
    ``arready``, ``rvalid``, ``rdata[31:0]``, ``rresp[1:0]``, ``rready`` (responses are
    plain 2-bit values; compare them with :class:`AxiResp`).
    """
    return wiring.Signature({
        "awvalid": Out(1),
        "awaddr": Out(AXIL_ADDR_WIDTH),
        "awready": In(1),
        "wvalid": Out(1),
        "wdata": Out(AXIL_DATA_WIDTH),
        "wready": In(1),
        "bvalid": In(1),
        "bresp": In(2),
        "bready": Out(1),
        "arvalid": Out(1),
        "araddr": Out(AXIL_ADDR_WIDTH),
        "arready": In(1),
        "rvalid": In(1),
        "rdata": In(AXIL_DATA_WIDTH),
        "rresp": In(2),
        "rready": Out(1),
    })


#: The slave's flat AXI-Lite ports as OpenNIC names them (after ``s_axil_``):
#: ``(name, direction seen from the slave, width)``.
AXIL_SLAVE_PORTS = (
    ("awvalid", "in", 1), ("awaddr", "in", AXIL_ADDR_WIDTH), ("awready", "out", 1),
    ("wvalid", "in", 1), ("wdata", "in", AXIL_DATA_WIDTH), ("wready", "out", 1),
    ("bvalid", "out", 1), ("bresp", "out", 2), ("bready", "in", 1),
    ("arvalid", "in", 1), ("araddr", "in", AXIL_ADDR_WIDTH), ("arready", "out", 1),
    ("rvalid", "out", 1), ("rdata", "out", AXIL_DATA_WIDTH), ("rresp", "out", 2),
    ("rready", "in", 1))


def connect_flat_slave(m, owner, bus, prefix="s_axil_"):
    """Join ``owner``'s flat ``<prefix><name>`` ports to ``bus``, the ``axil`` port of a
    slave (a register file, or the ``s`` side of a clock bridge)."""
    for name, d, _ in AXIL_SLAVE_PORTS:
        port, wire = getattr(owner, prefix + name), getattr(bus, name)
        m.d.comb += wire.eq(port) if d == "in" else port.eq(wire)
