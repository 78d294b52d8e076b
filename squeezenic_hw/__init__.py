"""SqueezeNIC-HW: Amaranth generators for an in-NIC gradient-compression FPGA NIC."""

__version__ = "0.1.0"
