"""One encoder/decoder pair per codec, the banks that put every codec of a lane in one
pipeline, the pipelined fp32 multiplier and the counter RNG."""
