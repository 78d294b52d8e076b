"""AXI-Lite: the bus signature, the register file and the clock bridge."""
