package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a real service and can cut them: a network partition
// between a client and a real server, without stopping the server other tests share. It can
// also freeze them: nothing goes through either way, not even a close, until Thaw (a
// network that drops everything, as seen by the server).
type Proxy struct {
	Addr   string // where clients connect
	target string

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool
	accepted int
	wg       sync.WaitGroup
	thawed   chan struct{} // closed while traffic flows; a fresh one while frozen
}

// NewProxy starts a proxy to target on a free loopback port; it stops at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}, thawed: make(chan struct{})}
	close(p.thawed)
	p.serve(ln)
	t.Cleanup(func() { p.Thaw(); p.Cut(); p.wg.Wait() })
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, up) {
				return
			}
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
}

func (p *Proxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, x := range c {
			x.Close()
		}
		return false
	}
	for _, x := range c {
		p.conns[x] = true
	}
	p.accepted++
	return true
}

// Accepted is how many connections the proxy has forwarded so far: whether a client used the
// address it was given.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.waitThawed() // a frozen proxy holds what it read, and the close too
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

func (p *Proxy) waitThawed() {
	p.mu.Lock()
	thawed := p.thawed
	p.mu.Unlock()
	<-thawed
}

// Freeze stops all traffic through the proxy, both ways, closes included, until Thaw; new
// connections are accepted but get nothing through either.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // frozen already
	}
}

// Thaw lets the traffic held by Freeze through.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// Cut closes every connection and refuses new ones (connection refused) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("proxy: listening again on %s: %v", p.Addr, err)
	}
	p.serve(ln)
}
