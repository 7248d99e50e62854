"""A job's data plane in Redis: per-job keys and their ACL user, the wire codec, versioned
parameters, trajectory and gradient streams, and the clients that reach them."""
