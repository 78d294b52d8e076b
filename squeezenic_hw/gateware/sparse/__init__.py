"""The blocks of codec 7, ``threshold``: compactor and frame builder (TX), index-to-bitmap
and expander (RX)."""
