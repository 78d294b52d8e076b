"""The numpy reference of the host-bandwidth arrays: what each lane's checker must end with.

Lane ``k`` of a :class:`~squeezenic_hw.gateware.arrays.lane_arrays.TxArray` runs the
generator configuration with ``value_seed + k``, UDP source port
``src_port_base + k`` and ``tuser_src = k``; its host frames go through the TX
reference lane; the wire frames of lane ``k`` reach RX lane ``k`` (the
distributor routes by UDP source port), go through the RX reference lane, and
the checker reference counts and CRCs what comes out. The arbiter's
interleaving of lanes on the wire does not change any of that.
"""

from dataclasses import replace

from squeezenic_hw.spec.codecs import parse_codec_spec
from squeezenic_hw.spec.generator import GeneratorConfig, lane_run_config
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import lane as lane_reference
from .checker import check_frames
from .generator import generate_frames

__all__ = ["lane_config", "array_reference"]


def lane_config(config, k, src_port_base, port=DEFAULT_PORT):
    """Generator configuration of lane ``k`` in an array whose lanes use ``port``."""
    return replace(config, value_seed=(config.value_seed + k) % 2**32,
                   udp_src_port=src_port_base + k, tuser_src=k,
                   template=replace(config.template, dst_port=port))


def array_reference(n_lanes, config, n_frames, *, codecs=None, mtu=DEFAULT_MTU,
                    port=DEFAULT_PORT, max_host_elements=DEFAULT_HOST_ELEMENTS,
                    src_port_base=0x5000):
    """Per lane: the TX/RX reference counters and the checker's expected counters.

    Returns
    -------
    list of dict
        ``{"host": [...], "wire": [...], "tx": counters, "rx": counters,
        "checker": counters}`` for lanes 0 … n_lanes-1.
    """
    out = []
    # codec specs ("fixed:8") name the lanes' build; the reference lanes take the names
    names = None if codecs is None else [parse_codec_spec(c)[0].name for c in codecs]
    for k in range(n_lanes):
        cfg = lane_config(lane_run_config(config if config is not None else GeneratorConfig(),
                                          codecs), k, src_port_base, port)
        host = generate_frames(cfg, n_frames)
        wire, txc = lane_reference.tx(host, port=port, mtu=mtu, codecs=names)
        back, rxc = lane_reference.rx(wire, port=port, max_host_elements=max_host_elements,
                                      codecs=names)
        out.append({"host": host, "wire": wire, "tx": txc, "rx": rxc,
                    "checker": check_frames(back, port=port)})
    return out
