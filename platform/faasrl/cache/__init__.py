"""The Redis side of faasrl: the embedded server now; codecs, streams and stores as they come."""
