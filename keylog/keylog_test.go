package keylog

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

func TestWriteAndParse(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	cr := seq(32, 0)
	if err := w.Write(ClientEarlyTrafficSecret, cr, seq(32, 0x40)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ServerHandshakeTrafficSecret, cr, seq(48, 0x80)); err != nil {
		t.Fatal(err)
	}
	// The same label and client random again is dropped, even with another secret.
	if err := w.Write(ClientEarlyTrafficSecret, cr, seq(32, 0x41)); err != nil {
		t.Fatal(err)
	}
	want := "CLIENT_EARLY_TRAFFIC_SECRET " + hex.EncodeToString(cr) + " " + hex.EncodeToString(seq(32, 0x40)) + "\n" +
		"SERVER_HANDSHAKE_TRAFFIC_SECRET " + hex.EncodeToString(cr) + " " + hex.EncodeToString(seq(48, 0x80)) + "\n"
	if buf.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", buf.String(), want)
	}
	entries, err := Parse(strings.NewReader("# comment\n\n" + buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Label != ClientEarlyTrafficSecret ||
		!bytes.Equal(entries[0].ClientRandom, cr) || !bytes.Equal(entries[1].Secret, seq(48, 0x80)) {
		t.Errorf("parsed %+v", entries)
	}
	if got := string(Format(entries)); got != want {
		t.Errorf("Format = %q", got)
	}
	if got := entries[0].String(); got+"\n" != strings.SplitAfter(want, "\n")[0] {
		t.Errorf("String = %q", got)
	}
}

func TestWriteRejects(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	for name, err := range map[string]error{
		"lowercase label":     w.Write("client_random", seq(32, 0), seq(32, 0)),
		"empty label":         w.Write("", seq(32, 0), seq(32, 0)),
		"short client random": w.Write(ClientTrafficSecret0, seq(31, 0), seq(32, 0)),
		"empty secret":        w.Write(ClientTrafficSecret0, seq(32, 0), nil),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cr := hex.EncodeToString(seq(32, 0))
	for name, line := range map[string]string{
		"two fields":       "CLIENT_TRAFFIC_SECRET_0 " + cr,
		"four fields":      "CLIENT_TRAFFIC_SECRET_0 " + cr + " 00 00",
		"short random":     "CLIENT_TRAFFIC_SECRET_0 " + cr[2:] + " 0011",
		"odd secret":       "CLIENT_TRAFFIC_SECRET_0 " + cr + " 001",
		"non-hex secret":   "CLIENT_TRAFFIC_SECRET_0 " + cr + " zz",
		"non-hex random":   "CLIENT_TRAFFIC_SECRET_0 " + strings.Repeat("g", 64) + " 00",
		"huge secret":      "CLIENT_TRAFFIC_SECRET_0 " + cr + " " + strings.Repeat("00", 65),
		"lowercase label":  "client_traffic_secret_0 " + cr + " 00",
		"punctuated label": "CLIENT-RANDOM " + cr + " 00",
	} {
		_, err := Parse(strings.NewReader("# ok\n" + line + "\n"))
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: error %q does not name line 2", name, err)
		}
	}
}

// TestTLSWriterMerges feeds the adapter lines the way crypto/tls does, and
// some it never would, and checks they merge with the engine's own lines.
func TestTLSWriterMerges(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	tw := w.TLSWriter()
	cr := hex.EncodeToString(seq(32, 0))
	line1 := "CLIENT_HANDSHAKE_TRAFFIC_SECRET " + cr + " " + strings.Repeat("11", 32) + "\n"
	line2 := "CLIENT_TRAFFIC_SECRET_0 " + cr + " " + strings.Repeat("22", 32) + "\n"
	if n, err := tw.Write([]byte(line1)); err != nil || n != len(line1) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	// A line split over two calls is held until it is complete.
	tw.Write([]byte(line2[:10]))
	if strings.Contains(buf.String(), "CLIENT_TRAFFIC") {
		t.Fatal("partial line written")
	}
	tw.Write([]byte(line2[10:] + "# odd but kept\n"))
	// The engine logs a secret TLS already logged: dropped. And one TLS omits: kept.
	w.Write(ClientHandshakeTrafficSecret, seq(32, 0), seq(32, 0x11))
	w.Write(ClientEarlyTrafficSecret, seq(32, 0), seq(32, 0x33))
	// TLS logs the same line twice: dropped.
	tw.Write([]byte(line1))
	want := line1 + line2 + "# odd but kept\n" + "CLIENT_EARLY_TRAFFIC_SECRET " + cr + " " + hex.EncodeToString(seq(32, 0x33)) + "\n"
	if buf.String() != want {
		t.Errorf("merged log:\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestConcurrentWrites(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	tw := w.TLSWriter()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				cr := seq(32, 0)
				cr[0], cr[1] = byte(g), byte(i) // unique per line, so none is a duplicate
				if g%2 == 0 {
					w.Write(ClientTrafficSecret0, cr, seq(32, 1))
				} else {
					tw.Write([]byte(Entry{ServerTrafficSecret0, cr, seq(32, 2)}.String() + "\n"))
				}
			}
		}()
	}
	wg.Wait()
	entries, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 400 {
		t.Errorf("got %d lines, want 400", len(entries))
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorSticks(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.Write(ClientTrafficSecret0, seq(32, 0), seq(32, 0)); err == nil {
		t.Fatal("error lost")
	}
	if err := w.Write(ServerTrafficSecret0, seq(32, 0), seq(32, 0)); err == nil {
		t.Fatal("error forgotten")
	}
}

func TestMerge(t *testing.T) {
	client := []Entry{{ClientTrafficSecret0, seq(32, 0), []byte{1}}}
	server := []Entry{{ClientTrafficSecret0, seq(32, 0), []byte{2}}, {ServerTrafficSecret0, seq(32, 0), []byte{3}}}
	got := Merge(client, server)
	want := []Entry{client[0], server[1]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge = %+v", got)
	}
}

func TestClientRandomRejects(t *testing.T) {
	hello := append([]byte{1, 0, 0, 200, 3, 3}, seq(32, 9)...)
	if cr, err := ClientRandom(hello); err != nil || !bytes.Equal(cr, seq(32, 9)) {
		t.Fatalf("ClientRandom = %x, %v", cr, err)
	}
	for name, b := range map[string][]byte{
		"short":        hello[:37],
		"server hello": append([]byte{2}, hello[1:]...),
		"tiny length":  append([]byte{1, 0, 0, 33}, hello[4:]...),
	} {
		if _, err := ClientRandom(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestQUICHandshake runs a real crypto/tls QUIC handshake in memory, takes
// the client random from the client's first CRYPTO data as the engine will,
// and checks that the secrets crypto/tls logged through TLSWriter carry it.
func TestQUICHandshake(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	cert := selfSigned(t)
	ctx := context.Background()
	cli := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{
		InsecureSkipVerify: true, NextProtos: []string{"hq-interop"}, MinVersion: tls.VersionTLS13,
		KeyLogWriter: w.TLSWriter(),
	}})
	srv := tls.QUICServer(&tls.QUICConfig{TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"hq-interop"}, MinVersion: tls.VersionTLS13,
		KeyLogWriter: w.TLSWriter(),
	}})
	cli.SetTransportParameters(nil)
	if err := cli.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var firstCrypto []byte
	done := map[*tls.QUICConn]bool{}
	pump := func(from, to *tls.QUICConn) {
		for {
			e := from.NextEvent()
			switch e.Kind {
			case tls.QUICNoEvent:
				return
			case tls.QUICWriteData:
				if from == cli && firstCrypto == nil && e.Level == tls.QUICEncryptionLevelInitial {
					firstCrypto = bytes.Clone(e.Data)
				}
				if err := to.HandleData(e.Level, e.Data); err != nil {
					t.Fatalf("HandleData: %v", err)
				}
			case tls.QUICTransportParametersRequired:
				from.SetTransportParameters(nil)
			case tls.QUICHandshakeDone:
				done[from] = true
			}
		}
	}
	for i := 0; i < 10 && !(done[cli] && done[srv]); i++ {
		pump(cli, srv)
		pump(srv, cli)
	}
	if !done[cli] || !done[srv] {
		t.Fatal("handshake did not finish")
	}
	cr, err := ClientRandom(firstCrypto)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, e := range entries {
		if !bytes.Equal(e.ClientRandom, cr) {
			t.Errorf("%s logged with client random %x, ClientHello has %x", e.Label, e.ClientRandom, cr)
		}
		labels[e.Label] = true
	}
	for _, l := range []string{ClientHandshakeTrafficSecret, ServerHandshakeTrafficSecret, ClientTrafficSecret0, ServerTrafficSecret0} {
		if !labels[l] {
			t.Errorf("no %s line in\n%s", l, Format(entries))
		}
	}
	// Both ends log the same secrets into one Writer; each appears once.
	if len(entries) != len(labels) {
		t.Errorf("%d lines for %d labels: duplicates kept", len(entries), len(labels))
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
