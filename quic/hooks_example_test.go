package quic_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"sync/atomic"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// spaceCounter counts the packets a connection receives in each packet
// number space; the other Hooks points keep NoHooks' no-op defaults.
type spaceCounter struct {
	quic.NoHooks
	packets [3]atomic.Int64
}

func (h *spaceCounter) PacketReceived(p quic.PacketInfo) { h.packets[p.Space].Add(1) }

// A Hooks implementation embeds NoHooks and implements only the points it
// needs: here, PacketReceived.
func ExampleNoHooks() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serverTLS, clientTLS := tlsConfigs("example")
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: serverTLS})
	if err != nil {
		log.Fatal(err)
	}
	wait := serveUpper(ctx, ep)
	defer wait()
	defer ep.Close()

	counter := &spaceCounter{}
	c, err := quic.Dial(ctx, "udp", ep.Addr().String(), &quic.Config{TLSConfig: clientTLS, Probe: counter})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(0, "")
	s, err := c.OpenStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s.Write([]byte("counted"))
	s.CloseWrite()
	answer, err := io.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("answer %s; packets received in Initial, Handshake and 1-RTT: %v %v %v\n", answer,
		counter.packets[quic.SpaceInitial].Load() > 0, counter.packets[quic.SpaceHandshake].Load() > 0,
		counter.packets[quic.SpaceApplication].Load() > 0)
	// Output: answer COUNTED; packets received in Initial, Handshake and 1-RTT: true true true
}
