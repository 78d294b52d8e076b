"""The lanes a campaign runs: builders of the TX and RX lanes of a set of codecs."""



from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.generator import NARROW_LANE_CODECS
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from .strategies import codec_ids

__all__ = ["lane_builders", "narrow_spec"]


def narrow_spec(codecs, code_bits):
    """The ``NarrowTxLane`` codec spec of ``codecs`` and ``code_bits`` (``"sign"``, or
    ``"fixed:b"`` for b of 2, 4, 8); ``ValueError`` when they make no narrow lane."""
    names = [codec_info(c).name for c in codec_ids(codecs)]
    spec = "sign" if names == ["sign"] and code_bits is None else (
        f"fixed:{code_bits}" if names == ["fixed"] else None)
    if spec not in NARROW_LANE_CODECS:
        raise ValueError("narrow: a narrow lane is of one codec, sign (without code_bits) "
                         "or fixed with code_bits 2, 4 or 8; got codecs "
                         f"{', '.join(names)}, code_bits {code_bits}")
    return spec


def lane_builders(codecs=None, *, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                  max_host_elements=DEFAULT_HOST_ELEMENTS, trusted=False, code_bits=None,
                  narrow=False):
    """``{"tx": (build, key), "rx": (build, key)}``: functions of no arguments that build
    the ``TxLane`` (``mtu``, ``port``, ``trusted``, ``code_bits``) and ``RxLane``
    (``port``, ``max_host_elements``) of ``codecs`` (default 0–6), and keys that name those
    builds for the compiled model's cache. With ``narrow`` the TX lane is the
    ``NarrowTxLane`` of :func:`narrow_spec`. (A bad parameter is the lanes' ``ValueError``
    when they are built.)"""
    from squeezenic_hw.gateware.rx.lane import RxLane
    from squeezenic_hw.gateware.tx.lane import TxLane
    from squeezenic_hw.gateware.tx.narrow import NarrowTxLane

    ids = codec_ids(codecs)
    tx = dict(codecs=ids, mtu=mtu, port=port)
    if trusted:
        tx |= dict(trusted=True, code_bits=code_bits)
    rx = dict(codecs=ids, port=port, max_host_elements=max_host_elements)
    # the keys of the default build name it as before, so its cached models are found
    tx_args = ", ".join(f"{k}={v}" for k, v in tx.items())
    tx_key = f"TxLane(codecs={ids})" if (mtu, port, trusted) == (
        DEFAULT_MTU, DEFAULT_PORT, False) else f"TxLane({tx_args})"
    rx_key = f"RxLane(codecs={ids})" if (port, max_host_elements) == (
        DEFAULT_PORT, DEFAULT_HOST_ELEMENTS) else \
        f"RxLane(codecs={ids}, port={port}, max_host_elements={max_host_elements})"
    rx_build = (lambda: RxLane(**rx), rx_key)
    if narrow:
        spec = narrow_spec(codecs, code_bits)
        return {"tx": (lambda: NarrowTxLane(spec, mtu=mtu, port=port),
                       f"NarrowTxLane({spec!r}, mtu={mtu}, port={port})"), "rx": rx_build}
    return {"tx": (lambda: TxLane(**tx), tx_key), "rx": rx_build}
