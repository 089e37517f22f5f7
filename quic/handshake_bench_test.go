package quic

import (
	"context"
	"crypto/tls"
	"syscall"
	"testing"
	"time"
)

// processCPU returns the user and system CPU time this process has used,
// which on a shared machine says more about a change than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkHandshake completes one full handshake (no resumption) per
// iteration against a server endpoint in this process, client and server
// CPU together, as `quiver bench handshakes` does between processes.
// "socket" dials from a fresh UDP socket each time (quic.Dial, what the
// bench client does); "endpoint" dials from one shared client endpoint.
func BenchmarkHandshake(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	scfg := testServerConfig(b, "hq-interop")
	sep, err := Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		b.Fatal(err)
	}
	defer sep.Close()
	go func() {
		for {
			c, err := sep.Accept(ctx)
			if err != nil {
				return
			}
			go func() { <-c.Done() }()
		}
	}()
	// The bench client does not verify the certificate; neither do we, so
	// that the figure matches what `quiver bench handshakes` measures.
	ccfg := &Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"hq-interop"}}}
	addr := sep.Addr().String()
	b.Run("socket", func(b *testing.B) {
		b.ReportAllocs()
		cpu := processCPU()
		defer func() { reportCPU(b, cpu) }()
		for b.Loop() {
			c, err := Dial(ctx, "udp", addr, ccfg)
			if err != nil {
				b.Fatal(err)
			}
			c.Close(0, "")
		}
	})
	b.Run("endpoint", func(b *testing.B) {
		cep, err := Listen("udp", "127.0.0.1:0", ccfg)
		if err != nil {
			b.Fatal(err)
		}
		defer cep.Close()
		b.ReportAllocs()
		cpu := processCPU()
		defer func() { reportCPU(b, cpu) }()
		for b.Loop() {
			c, err := cep.Dial(ctx, "udp", addr, ccfg)
			if err != nil {
				b.Fatal(err)
			}
			c.Close(0, "")
		}
	})
}
