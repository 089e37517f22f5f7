package quic

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// ticketMsg builds a NewSessionTicket message (RFC 8446 §4.6.1) with a
// ticket of ticketLen bytes and, when earlyData is set, an early_data
// extension carrying maxEarly.
func ticketMsg(ticketLen int, earlyData bool, maxEarly uint32) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3600) // ticket_lifetime
	body = binary.BigEndian.AppendUint32(body, 7)    // ticket_age_add
	body = append(body, 1, 0)                        // ticket_nonce
	body = binary.BigEndian.AppendUint16(body, uint16(ticketLen))
	body = append(body, make([]byte, ticketLen)...)
	var ext []byte
	if earlyData {
		ext = binary.BigEndian.AppendUint16(ext, 42)
		ext = binary.BigEndian.AppendUint16(ext, 4)
		ext = binary.BigEndian.AppendUint32(ext, maxEarly)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(ext)))
	body = append(body, ext...)
	return tlsMsg(tlsMsgNewSessionTicket, body)
}

func tlsMsg(typ byte, body []byte) []byte {
	return append([]byte{typ, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func TestPostHandshakeReader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		msg      []byte
		isClient bool
		want     TransportErrorCode // 0: accepted
	}{
		{"ticket", ticketMsg(16, false, 0), true, 0},
		{"ticket allowing 0-RTT", ticketMsg(16, true, 0xffffffff), true, 0},
		{"ticket with max_early_data_size 16384", ticketMsg(16, true, 16384), true, wire.ProtocolViolation},
		{"ticket with an empty ticket", ticketMsg(0, false, 0), true, wire.CryptoError(alertDecodeError)},
		{"truncated ticket", tlsMsg(tlsMsgNewSessionTicket, ticketMsg(16, false, 0)[4:20]), true, wire.CryptoError(alertDecodeError)},
		{"ticket sent by a client", ticketMsg(16, false, 0), false, wire.CryptoError(alertUnexpectedMessage)},
		{"KeyUpdate at a client", tlsMsg(tlsMsgKeyUpdate, []byte{0}), true, wire.CryptoError(alertUnexpectedMessage)},
		{"KeyUpdate at a server", tlsMsg(tlsMsgKeyUpdate, []byte{1}), false, 0x10a},
		{"CertificateRequest", tlsMsg(tlsMsgCertificateRequest, []byte{0, 0, 0}), true, wire.ProtocolViolation},
		{"ClientHello", tlsMsg(1, []byte{3, 3}), false, wire.CryptoError(alertUnexpectedMessage)},
		{"oversized", []byte{tlsMsgNewSessionTicket, 2, 0, 0}, true, wire.CryptoBufferExceeded},
	} {
		// Whole, then one byte at a time: the verdict does not depend on
		// how CRYPTO frames split the stream.
		for _, split := range []bool{false, true} {
			var r postHandshakeReader
			var err *TransportError
			if split {
				for i := 0; i < len(tc.msg) && err == nil; i++ {
					err = r.feed(tc.msg[i:i+1], tc.isClient)
				}
			} else {
				err = r.feed(tc.msg, tc.isClient)
			}
			switch {
			case tc.want == 0 && err != nil:
				t.Errorf("%s (split %v): %v, want accepted", tc.name, split, err)
			case tc.want != 0 && err == nil:
				t.Errorf("%s (split %v): accepted, want error %v", tc.name, split, tc.want)
			case tc.want != 0 && err.Code != tc.want:
				t.Errorf("%s (split %v): error %v, want %v", tc.name, split, err.Code, tc.want)
			}
			if tc.want == 0 && len(r.buf) != 0 {
				t.Errorf("%s (split %v): %d bytes kept after a complete message", tc.name, split, len(r.buf))
			}
		}
	}
}

// TestPostHandshakeReaderPartial checks that an incomplete message is held
// until its rest arrives and that two messages in one feed are both read.
func TestPostHandshakeReaderPartial(t *testing.T) {
	var r postHandshakeReader
	two := append(ticketMsg(8, false, 0), ticketMsg(8, true, 16384)...)
	if err := r.feed(two[:10], true); err != nil {
		t.Fatal(err)
	}
	if len(r.buf) != 10 {
		t.Fatalf("kept %d bytes, want 10", len(r.buf))
	}
	err := r.feed(two[10:], true)
	if err == nil || err.Code != wire.ProtocolViolation {
		t.Fatalf("second ticket: %v, want PROTOCOL_VIOLATION", err)
	}
}

// FuzzPostHandshakeReader feeds arbitrary bytes, split at an arbitrary
// point, to both ends' readers: they must not panic, must give the same
// verdict however the bytes are split, and must hold no more than one
// incomplete message.
func FuzzPostHandshakeReader(f *testing.F) {
	f.Add(ticketMsg(16, true, 0xffffffff), 3)
	f.Add(tlsMsg(tlsMsgKeyUpdate, []byte{0}), 1)
	f.Add(tlsMsg(tlsMsgCertificateRequest, []byte{0, 0, 0}), 0)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		if split < 0 || split > len(data) {
			split = len(data) / 2
		}
		for _, isClient := range []bool{true, false} {
			var whole, parts postHandshakeReader
			e1 := whole.feed(data, isClient)
			e2 := parts.feed(data[:split], isClient)
			if e2 == nil {
				e2 = parts.feed(data[split:], isClient)
			}
			if (e1 == nil) != (e2 == nil) || e1 != nil && e1.Code != e2.Code {
				t.Fatalf("client %v: whole %v, split at %d %v", isClient, e1, split, e2)
			}
			if e1 == nil && len(whole.buf) > 4+maxPostHandshakeMsg {
				t.Fatalf("kept %d bytes", len(whole.buf))
			}
		}
	})
}

// TestReleaseTLS checks that both ends drop crypto/tls once the handshake
// is confirmed, that the server still reads the 1-RTT CRYPTO stream (a
// TLS KeyUpdate closes with 0x010a, RFC 9001 §6), and that a client with a
// session cache keeps TLS for the tickets.
func TestReleaseTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		sc := serverConn(sep)
		for _, x := range []*Conn{c, sc} {
			var held, released, trackers bool
			x.run(t.Context(), func(time.Time) {
				held, released = x.tls != nil, x.tlsReleased
				trackers = x.spaces[initialSpace].acks.t != nil || x.spaces[handshakeSpace].acks.t != nil
			})
			if held || !released {
				t.Errorf("client %v: TLS held %v, released %v; want dropped after the handshake", x.isClient, held, released)
			}
			if trackers {
				t.Errorf("client %v: ACK trackers of the discarded spaces kept", x.isClient)
			}
		}
		c.InjectFrames(SpaceApplication, &wire.CryptoFrame{Data: tlsMsg(tlsMsgKeyUpdate, []byte{0})})
		err = c.Wait(t.Context())
		var te *TransportError
		if !errors.As(err, &te) || te.Code != 0x10a || !te.Remote {
			t.Fatalf("got %v, want remote CRYPTO_ERROR 0x10a", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.TLSConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var held bool
		c.run(t.Context(), func(time.Time) { held = c.tls != nil })
		if !held {
			t.Error("a client with a session cache dropped TLS")
		}
	})
}
