package server

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ipv6ClientBits is the prefix that stands for one IPv6 client: a host is given a /64, and
// counting its 2^64 addresses one by one would give it that many budgets.
const ipv6ClientBits = 64

// clientAddress is the peer's address, or, when the server sits behind a proxy that sets
// trustedHeader, the last address of that header: the one the proxy appended (entries before
// it are whatever the client sent, e.g. a forged X-Forwarded-For). An IPv6 client is its /64.
// An absent or malformed header falls back to the peer.
func clientAddress(r *http.Request, trustedHeader string) string {
	addr := peerAddress(r.RemoteAddr)
	if trustedHeader != "" {
		if values := r.Header.Values(trustedHeader); len(values) > 0 {
			entries := strings.Split(values[len(values)-1], ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(entries[len(entries)-1])); err == nil {
				addr = a
			}
		}
	}
	if !addr.IsValid() {
		return r.RemoteAddr
	}
	if addr = addr.Unmap(); addr.Is6() {
		p, _ := addr.Prefix(ipv6ClientBits)
		return p.String()
	}
	return addr.String()
}

func peerAddress(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(host)
	return a.WithZone("")
}
