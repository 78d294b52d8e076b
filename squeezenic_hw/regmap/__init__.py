"""The AXI-Lite register map: the generic model and the plugin's map."""
