"""The RX lane (wire to host) and its own stages: controller, unpacker, host-frame
splitter."""
