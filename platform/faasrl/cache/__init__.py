"""The Redis side of faasrl: the embedded server, the wire codec, per-job keys, versioned
parameters and trajectory streams."""
