"""The Vivado build plan of the U280 on-chip loopback
(:class:`~squeezenic_hw.gateware.u280.loopback.U280Loopback`, the paper's set-up).

The plan inserts an ILA on the design's ``mark_debug`` registers after synthesis
(``*_ila.tcl``) and writes the probe file (``.ltx``) for Vivado's hardware manager.
:func:`write_u280_plan` writes the build plan (Verilog, TCL, XDC, shell script)
without running Vivado.
"""

from pathlib import Path

from squeezenic_hw.gateware.u280 import U280Loopback
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

__all__ = ["write_u280_plan", "DESIGN_NAME", "USER_CLOCK_HZ", "debug_probes"]

#: Design (file) name of the build plan.
DESIGN_NAME = "squeezenic_u280_loopback"
#: Clock of the design (Hz): OpenNIC's 250 MHz user domain.
USER_CLOCK_HZ = 250e6


def debug_probes(n_lanes):
    """``[(net name, width)]`` of the ``mark_debug`` registers, in ILA probe order."""
    probes = [("all_ok", 1)]
    for k in range(n_lanes):
        probes += [(f"lane{k}_ok", 1), (f"lane{k}_frames", 64), (f"lane{k}_crc", 32)]
    return probes


def _ila_tcl(n_lanes, clock_net="clk"):
    """Vivado commands that put one ILA on the ``mark_debug`` registers (after synthesis)."""
    lines = [
        "# ILA on the mark_debug registers of the loopback (inserted after synth_design;",
        "# opt_design implements it). Probe order: see squeezenic_hw.flows.u280.debug_probes.",
        "create_debug_core u_ila_0 ila",
        "set_property C_DATA_DEPTH 1024 [get_debug_cores u_ila_0]",
        "set_property C_TRIGIN_EN false [get_debug_cores u_ila_0]",
        "set_property C_TRIGOUT_EN false [get_debug_cores u_ila_0]",
        "set_property C_ADV_TRIGGER false [get_debug_cores u_ila_0]",
        "set_property C_EN_STRG_QUAL false [get_debug_cores u_ila_0]",
        "# the probes come from every SLR of the part: pipeline them into the ILA",
        "set_property C_INPUT_PIPE_STAGES 2 [get_debug_cores u_ila_0]",
        "set_property ALL_PROBE_SAME_MU true [get_debug_cores u_ila_0]",
        "set_property ALL_PROBE_SAME_MU_CNT 1 [get_debug_cores u_ila_0]",
        "set_property port_width 1 [get_debug_ports u_ila_0/clk]",
        f"connect_debug_port u_ila_0/clk [get_nets {clock_net}]",
    ]
    for index, (net, width) in enumerate(debug_probes(n_lanes)):
        port = f"u_ila_0/probe{index}"
        if index:
            lines.append("create_debug_port u_ila_0 probe")
        bits = [net] if width == 1 else [f"{{{net}[{b}]}}" for b in range(width)]
        lines += [f"set_property port_width {width} [get_debug_ports {port}]",
                  f"connect_debug_port {port} [get_nets [list {' '.join(bits)}]]"]
    lines += [
        f"set_property C_CLK_INPUT_FREQ_HZ {int(USER_CLOCK_HZ)} [get_debug_cores dbg_hub]",
        "set_property C_ENABLE_CLK_DIVIDER false [get_debug_cores dbg_hub]",
        "set_property C_USER_SCAN_CHAIN 1 [get_debug_cores dbg_hub]",
        f"connect_debug_port dbg_hub/clk [get_nets {clock_net}]",
    ]
    return "\n".join(lines) + "\n"


def _timing_xdc():
    period = 1e9 / USER_CLOCK_HZ
    return f"""\
# Timing of the U280 loopback (written by squeezenic_hw.flows.u280).
# The 100 MHz board clock has its create_clock (period 10.000 ns) in the main XDC,
# from the platform's Clock(100e6). The 250 MHz user clock is the MMCM's CLKOUT0:
# Vivado derives it from CLKIN1 (period 10.000 ns × DIVCLK 1 / MULT 10.0 × DIVIDE 4.0
# = {period:.3f} ns); this names the derived clock without redefining it (UG903,
# renaming auto-derived clocks), and the build script checks its period after synthesis.
create_generated_clock -name clk_250mhz [get_pins mmcm/CLKOUT0]
"""


def _period_check_tcl():
    period = 1e9 / USER_CLOCK_HZ
    return (f"set sqz_period [get_property PERIOD [get_clocks clk_250mhz]]\n"
            f"if {{abs($sqz_period - {period:.3f}) > 0.001}} {{\n"
            f"    error \"clk_250mhz has period $sqz_period ns, expected {period:.3f} ns "
            f"(250 MHz)\"\n"
            f"}}\n")


def write_u280_plan(out_dir, *, host_bw=400, codecs=None, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                    max_host_elements=DEFAULT_HOST_ELEMENTS, config=None, n_frames=0,
                    idle_timeout=256, ila=True):
    """Write the Vivado build plan of :class:`U280Loopback` into ``out_dir`` (no Vivado needed).

    Parameters are those of :class:`U280Loopback`; ``ila`` (default True)
    inserts the ILA on the ``mark_debug`` registers and writes the ``.ltx``.

    Files (``N`` = :data:`DESIGN_NAME`): ``N.v`` (the design, with the
    ``MMCME4_BASE``/``BUFG``/``IBUFDS``/``OBUF`` primitives), ``N.xdc`` (pins,
    I/O standards, the 100 MHz clock, the board's configuration settings),
    ``N_timing.xdc`` (the 250 MHz clock), ``N_ila.tcl`` (the ILA), ``N.tcl``
    (the Vivado batch script: ``vivado -mode batch -source N.tcl`` from
    ``out_dir``) and ``build_N.sh`` (runs it).

    Returns
    -------
    list of pathlib.Path
        The files written, sorted.
    """
    from squeezenic_hw.platforms.u280 import AlveoU280Platform

    top = U280Loopback(host_bw, codecs=codecs, mtu=mtu, port=port,
                       max_host_elements=max_host_elements, config=config, n_frames=n_frames,
                       idle_timeout=idle_timeout)
    platform = AlveoU280Platform()
    name = DESIGN_NAME
    platform.add_file(f"{name}_timing.xdc", _timing_xdc())
    after_synth = _period_check_tcl()
    overrides = {"script_after_synth": after_synth}
    if ila:
        platform.add_file(f"{name}_ila.tcl", _ila_tcl(top.n_lanes))
        overrides["script_after_synth"] = after_synth + f"source {name}_ila.tcl"
        overrides["script_after_bitstream"] = f"write_debug_probes -force {name}.ltx"
    plan = platform.build(top, name=name, build_dir=str(out_dir), do_build=False, **overrides)
    root = plan.extract(str(out_dir))
    return sorted(Path(root) / f for f in plan.files)
