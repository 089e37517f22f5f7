package protect

import (
	"crypto/tls"
	"fmt"
	"testing"
)

// phasePair is a client and a server KeyPhase wired to the same secrets.
type phasePair struct {
	client, server KeyPhase
}

func newPhasePair(t *testing.T, version uint32, suite uint16) *phasePair {
	c2s, s2c := testSecret(t, suite, 10), testSecret(t, suite, 20)
	p := &phasePair{}
	for _, err := range []error{
		p.client.InstallWrite(version, suite, c2s),
		p.client.InstallRead(version, suite, s2c),
		p.server.InstallRead(version, suite, c2s),
		p.server.InstallWrite(version, suite, s2c),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// sealed is a packet as it leaves the sender: the Key Phase bit in its
// header and its protected payload.
type sealed struct {
	header     []byte
	ciphertext []byte
	pn         uint64
	phase      uint8
}

func send(from *KeyPhase, pn uint64, msg string) sealed {
	header := []byte{0x40 | from.Phase()<<2, byte(pn)}
	return sealed{header, from.Seal(nil, header, []byte(msg), pn), pn, from.Phase()}
}

func recv(t *testing.T, to *KeyPhase, p sealed, msg string, wantUpdate bool) {
	t.Helper()
	plain, updated, err := to.Open(nil, p.header, p.ciphertext, p.pn, p.phase)
	if err != nil {
		t.Fatalf("packet %d (phase %d): %v", p.pn, p.phase, err)
	}
	if string(plain) != msg || updated != wantUpdate {
		t.Fatalf("packet %d: %q, updated %v; want %q, %v", p.pn, plain, updated, msg, wantUpdate)
	}
}

func recvFails(t *testing.T, to *KeyPhase, p sealed) {
	t.Helper()
	if _, updated, err := to.Open(nil, p.header, p.ciphertext, p.pn, p.phase); err != ErrDecrypt || updated {
		t.Fatalf("packet %d (phase %d): %v, updated %v; want ErrDecrypt", p.pn, p.phase, err, updated)
	}
}

// TestKeyPhase walks through RFC 9001 §6: an update initiated by the
// client, a packet of the old phase reordered after it (§6.5), a forged
// old-phase packet with a high packet number, discarding the old keys, and
// a second update initiated by the server.
func TestKeyPhase(t *testing.T) {
	for _, version := range []uint32{Version1, Version2} {
		for _, suite := range allSuites {
			t.Run(fmt.Sprintf("0x%08x/%s", version, tls.CipherSuiteName(suite)), func(t *testing.T) {
				p := newPhasePair(t, version, suite)
				c, s := &p.client, &p.server
				if c.ReadHeader() == nil || c.WriteHeader() == nil || c.Read() == nil || c.Write() == nil || c.NextRead() == nil {
					t.Fatal("accessors return nil after install")
				}
				hp := s.ReadHeader()

				recv(t, s, send(c, 1, "one"), "one", false)
				late := send(c, 2, "late") // delivered after the update
				recv(t, c, send(s, 1, "s1"), "s1", false)

				// The client initiates an update.
				if err := c.Update(); err != nil {
					t.Fatal(err)
				}
				if c.Phase() != 1 || c.Generation() != 1 {
					t.Fatalf("client phase %d generation %d", c.Phase(), c.Generation())
				}
				// A server packet still in phase 0 opens with the client's
				// previous read keys.
				recv(t, c, send(s, 2, "s2 old phase"), "s2 old phase", false)

				// RFC 9001 §6.2: "If a packet is successfully processed using
				// the next key and IV, then the peer has initiated a key
				// update. The endpoint MUST update its send keys".
				recv(t, s, send(c, 3, "three"), "three", true)
				if s.Phase() != 1 || s.Generation() != 1 || s.PreviousRead() == nil {
					t.Fatalf("server phase %d generation %d", s.Phase(), s.Generation())
				}
				if s.ReadHeader() != hp {
					t.Error("key update changed the header protector")
				}
				recv(t, c, send(s, 3, "s3 new phase"), "s3 new phase", false)

				// §6.5: the reordered phase-0 packet has a lower packet
				// number than the first phase-1 packet: previous keys.
				recv(t, s, late, "late", false)
				// A phase-0 packet with a higher number would be a new
				// update; the next keys do not open it.
				forged := late
				forged.pn = 9
				recvFails(t, s, forged)
				if s.Phase() != 1 || s.Generation() != 1 {
					t.Fatal("a failed packet changed the key phase")
				}

				// After three PTOs the old keys go (§6.5).
				s.DiscardPrevious()
				if s.PreviousRead() != nil {
					t.Fatal("previous keys kept")
				}
				recvFails(t, s, late)

				// The server initiates the second update.
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
				recv(t, c, send(s, 4, "s4"), "s4", true)
				recv(t, s, send(c, 10, "ten"), "ten", false)
				if c.Phase() != 0 || s.Phase() != 0 || c.Generation() != 2 || s.Generation() != 2 {
					t.Fatalf("after two updates: phases %d/%d, generations %d/%d", c.Phase(), s.Phase(), c.Generation(), s.Generation())
				}
			})
		}
	}
}

func TestKeyPhaseSelect(t *testing.T) {
	p := newPhasePair(t, Version1, tls.TLS_AES_128_GCM_SHA256)
	s := &p.server
	if k, next := s.Select(0, 5); k != s.Read() || next {
		t.Error("current phase")
	}
	if k, next := s.Select(1, 5); k != s.NextRead() || !next {
		t.Error("other phase without previous keys must be next")
	}
	s.Received(5)
	cur, nxt := s.Read(), s.NextRead()
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if s.Read() != nxt || s.PreviousRead() != cur {
		t.Fatal("Commit did not rotate")
	}
	if k, _ := s.Select(0, 3); k != cur {
		t.Error("old phase before any new-phase packet: previous keys")
	}
	s.Received(7)
	if k, _ := s.Select(0, 6); k != cur {
		t.Error("old phase, lower pn: previous keys")
	}
	if k, next := s.Select(0, 8); k != s.NextRead() || !next {
		t.Error("old phase, higher pn: next keys")
	}

	var empty KeyPhase
	if _, _, err := empty.Open(nil, nil, nil, 0, 0); err == nil {
		t.Error("Open without keys")
	}
	if err := empty.Update(); err == nil {
		t.Error("Update without keys")
	}
	if empty.ReadHeader() != nil || empty.WriteHeader() != nil {
		t.Error("header protectors without keys")
	}
}
