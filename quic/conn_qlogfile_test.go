package quic

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/qlog"
)

// TestQlogFilesComplete traces both ends of a transfer into qlog files
// with qlog.NewFileWriter and no other bookkeeping: the connection closes
// its recorder when it ends, so each file is complete and parses.
func TestQlogFilesComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		tracer := func(odcid []byte, isClient bool) qlog.Recorder {
			v := qlog.VantageServer
			if isClient {
				v = qlog.VantageClient
			}
			w, err := qlog.NewFileWriter(dir, odcid, v)
			if err != nil {
				t.Error(err)
				return nil
			}
			return w
		}
		n := newMemNet(5 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.Tracer = tracer
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Tracer = tracer
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 50000); err != nil {
			t.Fatal(err)
		}
		sc := serverConn(sep)
		c.Close(0, "")
		c.Wait(t.Context())
		sc.Wait(t.Context())
		// The server's draining period (RFC 9000 §10.2) ends well within
		// this.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 2 {
			t.Fatalf("%d qlog files, want 2", len(ents))
		}
		for _, e := range ents {
			f, err := qlog.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Named(qlog.NamePacketSent)) == 0 || len(f.Named(qlog.NamePacketReceived)) == 0 || len(f.Named(qlog.NameConnectionClosed)) != 1 {
				t.Errorf("%s: %d packet_sent, %d packet_received, %d connection_closed", e.Name(),
					len(f.Named(qlog.NamePacketSent)), len(f.Named(qlog.NamePacketReceived)), len(f.Named(qlog.NameConnectionClosed)))
			}
		}
	})
}
