"""What turns the gateware into products: Verilog for OpenNIC and the U280, synthesis
figures, the resource report and throughput runs."""
