"""The stages both lanes use: frame classifier, header builder, frame merger, and the
controllers' shared pieces."""
