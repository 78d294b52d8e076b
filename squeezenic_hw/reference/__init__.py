"""The numpy reference: every model the hardware is checked against, bit for bit.
Imports :mod:`squeezenic_hw.spec` only."""
