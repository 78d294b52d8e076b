"""Amaranth platform of the AMD/Xilinx Alveo U280 (XCU280, ``xcu280-fsvh2892-2L-e``).

Pin facts (package pins, I/O standards, clock frequencies) come from two public
sources, both in the OpenNIC shell repository (github.com/Xilinx/open-nic-shell,
commit 940907fc99fc8d73dbea0028b3a23095a660a42a):

* ``board_files/Xilinx/au280/production/1.1/part0_pins.xml`` and ``board.xml``
  (the Vivado board file: pins, I/O standards, interface frequencies), cited
  below as *board file*;
* ``constr/au280/pins.xdc`` (OpenNIC's own pin constraints), cited as *pins.xdc*;
  ``constr/au280/general.xdc`` for the configuration settings;
  ``script/board_settings/au280.tcl`` for the part name.

Resources
---------
``sysclk`` 0, 1, 3
    100 MHz LVDS system clocks (board file ``sysclk0/1/3``, SI53340 buffer,
    ``DQS_BIAS=TRUE`` as the board file sets it). ``sysclk`` 0 is ``default_clk``.
    The board file has no ``sysclk2``; the numbers follow the board's names.
``pcie_refclk`` 0
    100 MHz PCIe reference clock: a GT clock pin (no I/O standard). Request it
    with ``dir="-"`` and instantiate ``IBUFDS_GTE4``; the default buffer (IBUFDS)
    cannot reach a GT clock pin.
``pcie_perst`` 0
    PCIe PERST#, active low (``PinsN``: ``.i`` is 1 while the host holds reset).
``hbm_cattrip`` 0
    HBM catastrophic-temperature flag, an *output* to the card's satellite
    controller. See :data:`HBM_CATTRIP_NOTE`: a design must drive it low.
``qsfp_refclk`` 0, 1 / ``qsfp_refclk_161`` 0, 1
    156.25 MHz and 161.1328125 MHz reference clocks of QSFP28 cages 0 and 1 (GT
    clock pins, request with ``dir="-"`` for ``IBUFDS_GTE4``). OpenNIC's CMAC uses
    the 156.25 MHz ones (pins.xdc ``qsfp_refclk``; CMAC ``GT_REF_CLK_FREQ`` 156.25).
``qsfp`` 0, 1
    The four GTY lanes of each cage (``tx``/``rx`` differential, GT pins, no I/O
    standard). Lane ``k`` is the board file's ``qsfpN_TX_Pk``/``RX_Pk``.
``pcie`` 0
    The sixteen PCIe GTY lanes (board file ``pcie_rxK``/``pcie_txK``).
``satellite_uart`` 0, ``satellite_gpio`` 0
    UART and GPIO lines of the satellite controller (CMC), pins.xdc; the GPIOs
    are inputs to the FPGA (OpenNIC declares them ``input``).
``uart`` 0
    The CP2105 USB UART (board file ``rs232_uart``: FPGA TX on B33, RX on A28).
``i2c`` 0
    The main I²C bus (board file ``iic_main``), with its mux reset (active low).
``cpu_reset`` 0
    The board file's ``resetn`` interface (``CPU_RESET``, "CPU Reset Push Button,
    Active Low"); whether a button is fitted on the passively cooled card is not
    stated there, so no design here relies on it.

The board file lists **no user LED** and no user switch wired to the FPGA, so
status is read over JTAG (ILA / hardware manager).
"""

import textwrap

from amaranth.build import Attrs, Clock, DiffPairs, Pins, PinsN, Resource, Subsignal
from amaranth.vendor import XilinxPlatform

__all__ = ["AlveoU280Platform", "HBM_CATTRIP_NOTE", "BOARD_CONFIG_XDC", "PIN_SOURCES"]

#: Where the pins of this module come from (repository, commit, paths).
PIN_SOURCES = {
    "repository": "github.com/Xilinx/open-nic-shell",
    "commit": "940907fc99fc8d73dbea0028b3a23095a660a42a",
    "board_pins": "board_files/Xilinx/au280/production/1.1/part0_pins.xml",
    "board": "board_files/Xilinx/au280/production/1.1/board.xml",
    "pins_xdc": "constr/au280/pins.xdc",
    "general_xdc": "constr/au280/general.xdc",
    "board_settings": "script/board_settings/au280.tcl",
}

HBM_CATTRIP_NOTE = """\
HBM_CATTRIP (pin D32) tells the U280's satellite controller that an HBM stack has
reached a catastrophic temperature; the controller then shuts the card down
(power removed, the card drops off PCIe until a cold reboot: the reported
behaviour, AMD's U280 documentation is the authority). It is an FPGA output even
in designs that do not use HBM. Left undriven, the pin floats or takes the
bitstream's unused-pin pull (OpenNIC's general.xdc sets UNUSEDPIN Pullup), the
controller may read a trip and the card goes down soon after configuration. So a
U280 design drives it to 0 and adds PULLDOWN, as OpenNIC does (pins.xdc: "Fix the
CATTRIP issue for custom flow", PULLDOWN TRUE; open_nic_shell.sv drives it with an
OBUF of 1'b0)."""

_LVCMOS18 = {"IOSTANDARD": "LVCMOS18"}

#: Configuration settings of the board (``general.xdc``): the flash is a x4 SPI
#: at 1.8 V with 32-bit addresses. Appended to the platform's XDC.
BOARD_CONFIG_XDC = """\
# Alveo U280 configuration (OpenNIC constr/au280/general.xdc): quad SPI flash at 1.8 V.
set_property CONFIG_VOLTAGE 1.8 [current_design]
set_property CONFIG_MODE SPIx4 [current_design]
set_property BITSTREAM.CONFIG.SPI_BUSWIDTH 4 [current_design]
set_property BITSTREAM.CONFIG.SPI_32BIT_ADDR YES [current_design]
set_property BITSTREAM.CONFIG.CONFIGRATE 85.0 [current_design]
set_property BITSTREAM.CONFIG.EXTMASTERCCLK_EN disable [current_design]
set_property BITSTREAM.CONFIG.SPI_FALL_EDGE YES [current_design]
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
"""


def _sysclk(number, p, n):
    # board file: sysclkN_p/_n, iostandard LVDS, dqs_bias TRUE; board.xml: 100000000 Hz
    return Resource("sysclk", number, DiffPairs(p, n, dir="i"), Clock(100e6),
                    Attrs(IOSTANDARD="LVDS", DQS_BIAS="TRUE"))


def _gt_clock(name, number, p, n, frequency):
    # GT reference clock pins: dedicated analog inputs, no IOSTANDARD
    return Resource(name, number, DiffPairs(p, n, dir="i"), Clock(frequency))


def _gt_lanes(name, number, tx_p, tx_n, rx_p, rx_n):
    return Resource(name, number,
                    Subsignal("tx", DiffPairs(tx_p, tx_n, dir="o")),
                    Subsignal("rx", DiffPairs(rx_p, rx_n, dir="i")))


class AlveoU280Platform(XilinxPlatform):
    """Alveo U280: XCU280 (UltraScale+ with HBM), part ``xcu280-fsvh2892-2L-e``.

    Vivado is the toolchain (Amaranth maps ``xcu280`` to the ``ultrascaleplus``
    family). ``default_clk`` is ``sysclk`` 0 (100 MHz); there is no
    ``default_rst``: designs derive their reset from an MMCM's ``LOCKED``.
    The XDC written for a build ends with :data:`BOARD_CONFIG_XDC`.
    """

    device = "xcu280"
    package = "fsvh2892"
    speed = "2L-e"           # script/board_settings/au280.tcl: xcu280-fsvh2892-2L-e
    default_clk = "sysclk"

    resources = [
        # board file part0_pins.xml: sysclk0 BJ43/BJ44, sysclk1 BH6/BJ6, sysclk3 G31/F31
        _sysclk(0, "BJ43", "BJ44"),
        _sysclk(1, "BH6", "BJ6"),
        _sysclk(3, "G31", "F31"),

        # pins.xdc: pcie_refclk_p AR15, _n AR14 (board file pcie_mgt_clkp/n, 100 MHz)
        _gt_clock("pcie_refclk", 0, "AR15", "AR14", 100e6),
        # pins.xdc: pcie_rstn BH26 LVCMOS18 (board file pcie_perstn_rst)
        Resource("pcie_perst", 0, PinsN("BH26", dir="i"), Attrs(**_LVCMOS18)),

        # pins.xdc: hbm_cattrip D32 LVCMOS18 PULLDOWN TRUE (board file HBM_CATTRIP D32).
        # Why it must be driven low: HBM_CATTRIP_NOTE.
        Resource("hbm_cattrip", 0, Pins("D32", dir="o"),
                 Attrs(IOSTANDARD="LVCMOS18", PULLDOWN="TRUE")),

        # pins.xdc: qsfp_refclk[0] T42/T43, [1] P42/P43 = board file qsfp0/1_156mhz
        _gt_clock("qsfp_refclk", 0, "T42", "T43", 156.25e6),
        _gt_clock("qsfp_refclk", 1, "P42", "P43", 156.25e6),
        # board file: qsfp0_161mhz R40/R41, qsfp1_161mhz M42/M43 (161132812 Hz in board.xml)
        _gt_clock("qsfp_refclk_161", 0, "R40", "R41", 161.1328125e6),
        _gt_clock("qsfp_refclk_161", 1, "M42", "M43", 161.1328125e6),

        # board file: qsfp0_TX_P0..3 / TX_N0..3 / RX_P0..3 / RX_N0..3
        _gt_lanes("qsfp", 0,
                  tx_p="L48 L44 K46 J48", tx_n="L49 L45 K47 J49",
                  rx_p="L53 K51 J53 H51", rx_n="L54 K52 J54 H52"),
        # board file: qsfp1_*
        _gt_lanes("qsfp", 1,
                  tx_p="G48 E48 C48 A49", tx_n="G49 E49 C49 A50",
                  rx_p="G53 F51 E53 D51", rx_n="G54 F52 E54 D52"),

        # board file: pcie_tx0..15_p/n, pcie_rx0..15_p/n
        _gt_lanes("pcie", 0,
                  tx_p="AL11 AM9 AN11 AP9 AR11 AR7 AT9 AU11 AU7 AV9 AW11 AY9 BA11 BB9 BC11 BC7",
                  tx_n="AL10 AM8 AN10 AP8 AR10 AR6 AT8 AU10 AU6 AV8 AW10 AY8 BA10 BB8 BC10 BC6",
                  rx_p="AL2 AM4 AN6 AN2 AP4 AR2 AT4 AU2 AV4 AW6 AW2 AY4 BA6 BA2 BB4 BC2",
                  rx_n="AL1 AM3 AN5 AN1 AP3 AR1 AT3 AU1 AV3 AW5 AW1 AY3 BA5 BA1 BB3 BC1"),

        # pins.xdc: satellite_uart_0_txd D29, _rxd E28; satellite_gpio[0..3] K28 J29 K29 J31
        Resource("satellite_uart", 0,
                 Subsignal("tx", Pins("D29", dir="o")),
                 Subsignal("rx", Pins("E28", dir="i")),
                 Attrs(**_LVCMOS18)),
        Resource("satellite_gpio", 0, Pins("K28 J29 K29 J31", dir="i"), Attrs(**_LVCMOS18)),

        # board file: USB_UART_TX B33 (rs232_uart TxD, FPGA output), USB_UART_RX A28
        Resource("uart", 0,
                 Subsignal("tx", Pins("B33", dir="o")),
                 Subsignal("rx", Pins("A28", dir="i")),
                 Attrs(**_LVCMOS18)),

        # board file: IIC_SCL_MAIN C30, IIC_SDA_MAIN C33 (drive 8, slow), IIC_MAIN_RESET_B_LS B31
        Resource("i2c", 0,
                 Subsignal("scl", Pins("C30", dir="io"), Attrs(DRIVE="8", SLEW="SLOW")),
                 Subsignal("sda", Pins("C33", dir="io"), Attrs(DRIVE="8", SLEW="SLOW")),
                 Subsignal("rst", PinsN("B31", dir="o")),
                 Attrs(**_LVCMOS18)),

        # board file: CPU_RESET L30 (board.xml resetn, rst_polarity 0)
        Resource("cpu_reset", 0, PinsN("L30", dir="i"), Attrs(**_LVCMOS18)),
    ]
    connectors = []

    @property
    def file_templates(self):
        templates = dict(super().file_templates)
        if self.toolchain == "Vivado":
            # the board's configuration settings go into every build's XDC
            xdc = textwrap.dedent(templates["{{name}}.xdc"]).strip()
            templates["{{name}}.xdc"] = xdc + "\n" + BOARD_CONFIG_XDC
        return templates
