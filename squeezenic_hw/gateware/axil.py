"""OpenNIC's AXI4-Lite subset: 32-bit address and data, no ``wstrb``, no ``prot``.

:func:`AxiLiteSignature` is seen from the master, so a slave port is
``"axil": In(AxiLiteSignature())`` and a master port ``Out(AxiLiteSignature())``.
Every handshake follows AXI: a transfer happens in a cycle where ``*valid`` and
``*ready`` are both high; a master must not wait for ``*ready`` before raising
``*valid``; once raised, ``*valid`` and its payload stay put until the transfer.
"""

from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXIL_ADDR_WIDTH", "AXIL_DATA_WIDTH", "AxiResp", "AxiLiteSignature"]

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
