"""Amaranth gateware: codec units, arithmetic, lanes."""
