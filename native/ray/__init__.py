"""llamay replicas on Ray Serve (the optional `[ray]` extra): an ingress that reads each request's prompt prefix,
engine replicas that each hold a whole llamay server, and a request router that sends a prefix to the replica that
holds it (docs/scale-out.md). Nothing here is imported by the rest of llamay: ray is needed only here."""
