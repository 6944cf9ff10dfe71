package testenv

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// LaunchPorts is the first of n consecutive loopback ports that nothing
// listens on, for servers a test has pipe launch on a port it names.
//
// They are below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port picked from inside it
// can be taken, between the pick and the server's start, as the local end
// of any outgoing connection on the machine (the tests' own requests to
// simulators among them), and pipe then waits for it to be free instead
// of starting the server. Each process starts at its own offset, and
// within a process no port is handed out twice.
func LaunchPorts(t testing.TB, n int) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	low, high := 10000, ephemeralLow()
	span := high - low
	start := low + (os.Getpid()*97)%span
	for step := 0; step < span; step += n {
		base := low + (start-low+step)%span
		if base+n > high {
			continue
		}
		if free(base, n) {
			for i := range n {
				handedOut[base+i] = true
			}
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports between %d and %d", n, low, high)
	return 0
}

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// free says that none of the n ports from base was handed out and that
// each can be listened on now.
func free(base, n int) bool {
	for p := base; p < base+n; p++ {
		if handedOut[p] {
			return false
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// ephemeralLow is the lowest port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil || v <= 10000+64 {
		return 32768
	}
	return v
}
