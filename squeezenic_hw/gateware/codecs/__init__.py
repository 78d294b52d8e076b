"""Per-codec encoder/decoder units, one module per codec."""
