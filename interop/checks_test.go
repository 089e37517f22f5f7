package interop

import (
	"net/netip"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/quic/wire"
)

// cmTraces builds the two traces of a connectionmigration run in which the
// client moves to the server's preferred address as RFC 9000 §9.6 asks;
// each mutation then breaks one part of it.
func cmTraces(mutate func(cl, sv *analyze.Conn)) (cl, sv *analyze.Trace) {
	t0 := time.Unix(1_800_000_000, 0)
	client := netip.MustParseAddrPort("198.18.0.100:50000")
	relayUp := netip.MustParseAddrPort("198.18.100.2:40000")
	orig, relay := netip.MustParseAddrPort("198.18.100.100:443"), netip.MustParseAddrPort("198.18.0.2:443")
	pref := netip.MustParseAddrPort("198.18.100.100:4434")
	ee := &analyze.EncryptedExtensions{TransportParameters: &wire.TransportParameters{HasPreferredAddress: true,
		PreferredAddress: wire.PreferredAddress{IPv4: pref.Addr().As4(), IPv4Port: pref.Port(), ConnectionID: []byte{2}}}}
	frame := func(t wire.FrameType, data byte) analyze.Frame {
		f := analyze.Frame{Type: t}
		if data != 0 {
			f.Data = analyze.HexBytes{data, 0, 0, 0, 0, 0, 0, 0}
		}
		return f
	}
	pkt := func(ms int, dir analyze.Direction, src, dst netip.AddrPort, dcid byte, frames ...analyze.Frame) *analyze.Packet {
		return &analyze.Packet{Time: t0.Add(time.Duration(ms) * time.Millisecond), Dir: dir, Src: src, Dst: dst, Type: wire.PacketType1RTT,
			DCID: analyze.HexBytes{dcid}, Decrypted: true, Frames: frames}
	}
	conn := func(clientAddr, server netip.AddrPort) *analyze.Conn {
		return &analyze.Conn{ClientHandshakePackets: 1, AppKeys: true, HandshakeDone: true, EncryptedExtensions: ee,
			Paths: []*analyze.Path{{Client: clientAddr, Server: server, Validated: true}}}
	}
	c, s := conn(client, relay), conn(relayUp, orig)
	c.Paths = append(c.Paths, &analyze.Path{Client: client, Server: pref, ChallengedByClient: true, ClientValidated: true, ClientValidatedFromServer: true})
	s.Paths = append(s.Paths, &analyze.Path{Client: relayUp, Server: pref, ChallengedByServer: true, Validated: true})
	c.Packets = []*analyze.Packet{
		pkt(10, analyze.FromClient, client, relay, 1, frame(wire.FrameTypeStream, 0)),
		pkt(20, analyze.FromClient, client, pref, 2, frame(wire.FrameTypePathChallenge, 7)),
		pkt(30, analyze.FromServer, pref, client, 9, frame(wire.FrameTypePathResponse, 7), frame(wire.FrameTypePathChallenge, 8)),
		pkt(40, analyze.FromClient, client, pref, 2, frame(wire.FrameTypePathResponse, 8), frame(wire.FrameTypeAck, 0)),
		pkt(50, analyze.FromServer, pref, client, 9, frame(wire.FrameTypeStream, 0)),
	}
	for _, p := range c.Packets {
		q := *p
		if q.Src == client {
			q.Src = relayUp
		} else if q.Dst == client {
			q.Dst = relayUp
		}
		if q.Dst == relay {
			q.Dst = orig
		}
		q.Time = q.Time.Add(time.Millisecond)
		s.Packets = append(s.Packets, &q)
	}
	if mutate != nil {
		mutate(c, s)
	}
	return &analyze.Trace{Conns: []*analyze.Conn{c}}, &analyze.Trace{Conns: []*analyze.Conn{s}}
}

// TestJudgeConnectionMigration checks §5.22's judgement on traces where
// the client moves as it should, and on traces broken in one way each.
func TestJudgeConnectionMigration(t *testing.T) {
	tc := testCase(t, "connectionmigration")
	for _, x := range []struct {
		name   string
		mutate func(cl, sv *analyze.Conn)
		failed []string // the CM checks that must fail; the others must pass
	}{
		{"moved", nil, nil},
		{"no-offer", func(cl, sv *analyze.Conn) {
			cl.EncryptedExtensions = &analyze.EncryptedExtensions{TransportParameters: &wire.TransportParameters{}}
		}, []string{"preferred-address"}},
		{"client-stays", func(cl, sv *analyze.Conn) {
			// A client that ignores the offer (quic-go, x/net).
			cl.Paths, sv.Paths = cl.Paths[:1], sv.Paths[:1]
			cl.Packets, sv.Packets = cl.Packets[:1], sv.Packets[:1]
		}, []string{"client-validated-preferred", "new-cid-for-preferred", "server-validated-from-preferred", "moved-to-preferred"}},
		{"answer-from-elsewhere", func(cl, sv *analyze.Conn) {
			cl.Paths[1].ClientValidatedFromServer = false
		}, []string{"client-validated-preferred", "moved-to-preferred"}},
		{"cid-reused", func(cl, sv *analyze.Conn) {
			cl.Packets[3].DCID = analyze.HexBytes{1}
		}, []string{"new-cid-for-preferred"}},
		{"server-never-probes", func(cl, sv *analyze.Conn) {
			sv.Paths[1].ChallengedByServer = false
		}, []string{"server-validated-from-preferred"}},
		{"server-moves-early", func(cl, sv *analyze.Conn) {
			sv.Packets[2].Frames = append(sv.Packets[2].Frames, analyze.Frame{Type: wire.FrameTypeStream})
		}, []string{"server-moved-after-validation"}},
	} {
		t.Run(x.name, func(t *testing.T) {
			cl, sv := cmTraces(x.mutate)
			c := &Cell{Test: tc, ClientTrace: cl, ServerTrace: sv, Downloads: t.TempDir()}
			judgeConnectionMigration(c)
			failed := map[string]bool{}
			for _, id := range x.failed {
				failed[id] = true
			}
			seen := map[string]bool{}
			for _, ch := range c.Checks {
				seen[ch.ID] = true
				switch ch.ID {
				case "handshakes", "v1", "files", "client-address-changed-compat":
					continue // not built into these traces
				}
				if want := failed[ch.ID]; (ch.Status == Failed) != want {
					t.Errorf("%s: %s (%s), want failed %v", ch.ID, ch.Status, ch.Detail, want)
				}
			}
			for id := range failed {
				if !seen[id] {
					t.Errorf("check %s not made", id)
				}
			}
		})
	}
}
