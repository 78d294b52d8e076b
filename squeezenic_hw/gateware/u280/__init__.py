"""The standalone U280 top: the on-chip loopback and its clocking."""

from .loopback import DEFAULT_CONFIG, MMCM_PARAMS, U280Loopback

__all__ = ["U280Loopback", "DEFAULT_CONFIG", "MMCM_PARAMS"]
