package connlimit

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of a refusal, as the refusals counter labels them.
const (
	ReasonTotal      = "total"
	ReasonPerAddress = "per_address"
)

// Config configures a Listener.
type Config struct {
	// Limits are the caps. Defaults as in Limits.
	Limits
	// Name labels the listener's refusals ("api", "public"). Required.
	Name string
	// Exempt are client addresses spared the per-address cap: the proxies
	// (an ingress) every client comes through. They count toward Total.
	// Default none.
	Exempt []netip.Prefix
	// Registerer receives laneway_listener_connections_refused_total
	// {listener=Name, reason}. Default: nil, not registered.
	Registerer prometheus.Registerer
}

// Listener is a net.Listener whose Accept closes, at once, a connection
// over a cap, and hands out the others wrapped so that their Close frees
// their place.
type Listener struct {
	net.Listener
	cfg     Config
	refused *prometheus.CounterVec

	mu     sync.Mutex
	total  int
	byAddr map[netip.Addr]int // open connections per client (IPv6: per /64)
}

// Wrap caps ln's connections as cfg says.
func Wrap(ln net.Listener, cfg Config) (*Listener, error) {
	if ln == nil || cfg.Name == "" {
		return nil, errors.New("connlimit: a listener and a Name are required")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "laneway_listener_connections_refused_total",
		Help:        "Connections closed as soon as accepted, over the listener's cap in all or per client address.",
		ConstLabels: prometheus.Labels{"listener": cfg.Name},
	}, []string{"reason"})
	refused.WithLabelValues(ReasonTotal)
	refused.WithLabelValues(ReasonPerAddress)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(refused); err != nil {
			return nil, err
		}
	}
	return &Listener{Listener: ln, cfg: cfg, refused: refused, byAddr: map[netip.Addr]int{}}, nil
}

// Accept returns the next connection within the caps; those over a cap
// are closed and counted meanwhile.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := l.key(c.RemoteAddr())
		if reason := l.admit(key); reason != "" {
			_ = c.Close()
			l.refused.WithLabelValues(reason).Inc()
			continue
		}
		return &conn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

// key is the client's place in byAddr: its IP, its /64 for IPv6 (one
// client easily has a whole /64), or the zero Addr when it is exempt or
// not an IP.
func (l *Listener) key(addr net.Addr) netip.Addr {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(tcp.IP)
	ip = ip.Unmap()
	for _, p := range l.cfg.Exempt {
		if p.Contains(ip) {
			return netip.Addr{}
		}
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// admit takes a place for a connection of key; the reason it is refused
// when over a cap.
func (l *Listener) admit(key netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.cfg.Total {
		return ReasonTotal
	}
	if key.IsValid() {
		if l.byAddr[key] >= l.cfg.PerAddress {
			return ReasonPerAddress
		}
		l.byAddr[key]++
	}
	l.total++
	return ""
}

// release frees the place of a closed connection of key; an address with
// none left is dropped, so the map holds only open clients.
func (l *Listener) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if !key.IsValid() {
		return
	}
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
}

// conn frees its place in the listener once, at its first Close.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes, as the wrapped TCP connection can: net/http
// uses it to let a client read an error response before the close.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
