"""Host-bandwidth arrays: generators, checkers, arbiter, distributor, source-port splitter
and the TX/RX arrays built from them."""
