package conformance

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// rawClient is the scripted raw endpoint as the scenarios drive it: the
// client with the scenario's T and the recorder's trace of its connection.
type rawClient struct {
	*rawquic.Client[*packet]
	t     *T
	trace *connTrace
}

// newRaw opens a raw client socket towards the target.
func (t *T) newRaw(ctx context.Context, o rawquic.Options) *rawClient {
	ua, err := net.ResolveUDPAddr("udp", t.profile.Target.Address)
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The target address %q does not resolve: %v.", t.profile.Target.Address, err))
	}
	var laddr *net.UDPAddr
	if o.LocalIP.IsValid() {
		laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(o.LocalIP, 0))
	}
	uc, err := net.DialUDP("udp", laddr, ua)
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The tester cannot open a UDP socket towards %s: %v.", ua, err))
	}
	t.cleanup(func() { uc.Close() })
	if o.ALPN == nil {
		o.ALPN = []string{t.alpn()}
	}
	o.ServerName = t.profile.sni()
	rc := &rawClient{t: t, trace: t.rec.newConn(o.Label)}
	rc.Client = rawquic.New[*packet](rawHostOf{t, rc.trace}, uc, o)
	rc.trace.setAddrs(rc.Local, rc.Peer)
	return rc
}

// rawHostOf is the raw client's host: the scenario's T and the recorder's
// trace of the connection.
type rawHostOf struct {
	t *T
	c *connTrace
}

func (h rawHostOf) Errorf(format string, args ...any) { h.t.Errorf(format, args...) }
func (h rawHostOf) Fact(key string, v any)            { h.t.Fact(key, v) }
func (h rawHostOf) Cleanup(f func())                  { h.t.cleanup(f) }
func (h rawHostOf) PTO() time.Duration                { return h.t.PTO() }
func (h rawHostOf) NoteRTT(d time.Duration)           { h.t.noteRTT(d) }
func (h rawHostOf) KeyLog() io.Writer                 { return h.t.rec }
func (h rawHostOf) KeepRaw(at time.Time, b []byte)    { h.c.keepRaw(at, b) }
func (h rawHostOf) Processed(p *packet)               { h.c.compact(p) }

func (h rawHostOf) Datagram(at time.Time, sent bool, local, peer netip.AddrPort, b []byte) {
	h.t.rec.addDatagram(datagramRec{at: at, sent: sent, local: local, peer: peer, b: b})
}

func (h rawHostOf) Packet(i rawquic.PacketInfo, payload []byte) *packet {
	m := pktMeta{path: i.Path, ecn: i.ECN, firstByte: i.FirstByte, keyPhase: i.KeyPhase, local: i.Local}
	return h.c.recordMeta(i.Sent, i.At, i.Type, i.Version, i.Space, i.PN, i.DCID, i.SCID, i.Size, i.Datagram, payload, m)
}

func (h rawHostOf) HeaderOnly(at time.Time, b []byte, datagram int) *packet {
	return h.c.recordHeaderOnly(at, b, datagram)
}

func (h rawHostOf) Undecryptable(at time.Time, b []byte) {
	if h.c.isStatelessReset(b) {
		h.c.recordStatelessReset(at, len(b))
	}
}

func (h rawHostOf) LastSent() *packet {
	ps := h.t.rec.snapshot()
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].sent && ps[i].conn == h.c.id {
			return ps[i]
		}
	}
	return nil
}

// Frames returns the packet's decoded frames (for the raw client).
func (p *packet) Frames() []wire.Frame { return p.frames }

// AckEliciting reports whether the packet elicits an acknowledgment.
func (p *packet) AckEliciting() bool { return p.ackEliciting }
