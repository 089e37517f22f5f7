package quic

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/qlog"
)

func TestQlogEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		var rec qlog.MemoryRecorder
		ccfg := testClientConfig(t, "hq-interop")
		var gotODCID []byte
		ccfg.Tracer = func(odcid []byte, isClient bool) qlog.Recorder {
			gotODCID = odcid
			return &rec
		}
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 2000); err != nil {
			t.Fatal(err)
		}
		c.Close(7, "done")
		c.Wait(t.Context())
		if len(gotODCID) != 8 {
			t.Errorf("tracer got odcid %x", gotODCID)
		}
		if len(qlog.EventsOf[qlog.ConnectionStarted](&rec)) != 1 {
			t.Errorf("want one connection_started")
		}
		ps := qlog.EventsOf[qlog.ParametersSet](&rec)
		if len(ps) != 2 || ps[0].Owner != qlog.OwnerLocal || ps[1].Owner != qlog.OwnerRemote {
			t.Errorf("parameters_set events: %+v", ps)
		}
		sent := qlog.EventsOf[qlog.PacketSent](&rec)
		recv := qlog.EventsOf[qlog.PacketReceived](&rec)
		if len(sent) == 0 || len(recv) == 0 || len(sent[0].Frames) == 0 || sent[0].Frames[0].FrameType != qlog.FrameCrypto {
			t.Errorf("%d packet_sent, %d packet_received; first sent %+v", len(sent), len(recv), sent)
		}
		var sawStream bool
		for _, r := range recv {
			for _, f := range r.Frames {
				sawStream = sawStream || f.FrameType == qlog.FrameStream
			}
		}
		if !sawStream {
			t.Errorf("no STREAM frame in packet_received events")
		}
		closed := qlog.EventsOf[qlog.ConnectionClosed](&rec)
		if len(closed) != 1 || !closed[0].Application || closed[0].Code != 7 || closed[0].Owner != qlog.OwnerLocal {
			t.Errorf("connection_closed: %+v", closed)
		}
		if len(qlog.EventsOf[qlog.KeyUpdated](&rec)) < 4 {
			t.Errorf("want key_updated for handshake and 1-RTT keys")
		}
	})
}

// TestKeyLog checks that both sides log the four TLS 1.3 secrets with the
// same client random, in a format keylog.Parse reads.
func TestKeyLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		var cbuf, sbuf bytes.Buffer
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.KeyLog = &cbuf
		scfg := testServerConfig(t, "hq-interop")
		scfg.KeyLog = &sbuf
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		// A request makes sure the server has completed its handshake.
		if err := fetch(t.Context(), c, 10); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
		sep.Close()
		cep.Close()
		ce, err := keylog.Parse(&cbuf)
		if err != nil {
			t.Fatal(err)
		}
		se, err := keylog.Parse(&sbuf)
		if err != nil {
			t.Fatal(err)
		}
		if len(ce) != 4 || len(se) != 4 {
			t.Fatalf("client logged %d secrets, server %d; want 4 each", len(ce), len(se))
		}
		want := map[string][]byte{}
		for _, e := range ce {
			want[e.Label] = e.Secret
		}
		for _, e := range se {
			if !bytes.Equal(want[e.Label], e.Secret) || !bytes.Equal(e.ClientRandom, ce[0].ClientRandom) {
				t.Errorf("server %s does not match the client's", e.Label)
			}
		}
	})
}
