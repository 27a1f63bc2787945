"""gRPC plumbing shared by the controller, the agents and the clients: auth, TLS, servers."""
