package main

// fdReserve is what the rest of the process (Kafka clients, the API, the
// embedded broker's connections) may need besides the receiver's sockets.
const fdReserve = 2000

// portsFor is how many ports the receiver spreads the endpoints over: one
// per endpoint, as real endpoints have their own hosts (and the sender its
// own keep-alive pool per host:port), unless that would risk running out
// of file descriptors. Each endpoint with its own port holds a listener and
// at least one keep-alive connection (two descriptors in this process, as
// the receiver is here too); bursts need more, so only half the budget is
// planned for. 0 means one port per endpoint.
func portsFor(cfg config) int {
	if cfg.Ports > 0 || cfg.SharedPort {
		return cfg.Ports
	}
	return autoPorts(cfg.Endpoints, openFileLimit())
}

func autoPorts(endpoints, fdLimit int) int {
	budget := fdLimit - fdReserve
	if fdLimit <= 0 || 3*endpoints <= budget/2 {
		return 0
	}
	// Shared ports: the descriptors go to connections instead.
	return max(1, min(endpoints, budget/16))
}
