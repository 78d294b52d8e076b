"""SqueezeNIC-HW: Amaranth generators for an in-NIC gradient-compression FPGA NIC."""

__version__ = "0.1.0"

import sys as _sys

# Amaranth's simulator and RTLIL back end write wide constants (the counter and
# control arrays of 32+ lanes) as decimal literals longer than Python's default
# limit of 4300 digits for int <-> str conversion.
if hasattr(_sys, "set_int_max_str_digits") and 0 < _sys.get_int_max_str_digits() < 100_000:
    _sys.set_int_max_str_digits(100_000)
