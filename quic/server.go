package quic

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// retryTokenLifetime is how long a Retry token stays valid.
const retryTokenLifetime = 10 * time.Second

// tokenProtector seals Retry tokens with AES-GCM under a key that lives
// as long as the endpoint. A token carries the client's address, the
// original destination connection ID, the Retry's source connection ID
// and an expiry time.
type tokenProtector struct {
	aead cipher.AEAD
}

func newTokenProtector() (*tokenProtector, error) {
	key := make([]byte, 16)
	rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &tokenProtector{aead: aead}, nil
}

// seal returns a token for addr, odcid and rscid.
func (t *tokenProtector) seal(now time.Time, addr netip.AddrPort, odcid, rscid []byte) []byte {
	var pt []byte
	pt = binary.BigEndian.AppendUint64(pt, uint64(now.Add(retryTokenLifetime).UnixNano()))
	pt = append(pt, byte(len(odcid)))
	pt = append(pt, odcid...)
	pt = append(pt, byte(len(rscid)))
	pt = append(pt, rscid...)
	ab, _ := addr.MarshalBinary()
	nonce := make([]byte, t.aead.NonceSize(), t.aead.NonceSize()+len(pt)+16)
	rand.Read(nonce)
	return t.aead.Seal(nonce, nonce, pt, ab)
}

// open validates a token from addr and returns the ODCID and Retry SCID
// it carries.
func (t *tokenProtector) open(now time.Time, addr netip.AddrPort, tok []byte) (odcid, rscid []byte, ok bool) {
	ns := t.aead.NonceSize()
	if len(tok) < ns+16 {
		return nil, nil, false
	}
	ab, _ := addr.MarshalBinary()
	pt, err := t.aead.Open(nil, tok[:ns], tok[ns:], ab)
	if err != nil || len(pt) < 10 {
		return nil, nil, false
	}
	if exp := int64(binary.BigEndian.Uint64(pt)); now.UnixNano() > exp {
		return nil, nil, false
	}
	pt = pt[8:]
	n := int(pt[0])
	if len(pt) < 1+n+1 {
		return nil, nil, false
	}
	odcid, pt = pt[1:1+n], pt[1+n:]
	m := int(pt[0])
	if len(pt) < 1+m {
		return nil, nil, false
	}
	return odcid, pt[1 : 1+m], true
}

// newTokenLifetime is how long a NEW_TOKEN token validates an address.
const newTokenLifetime = 24 * time.Hour

// sealAddressToken returns a token for NEW_TOKEN (RFC 9000 §8.1.3): it
// vouches for the client's IP address (not its port, which changes between
// connections) until it expires. Its associated data differs from a Retry
// token's, so neither passes for the other.
func (t *tokenProtector) sealAddressToken(now time.Time, addr netip.Addr) []byte {
	pt := binary.BigEndian.AppendUint64(nil, uint64(now.Add(newTokenLifetime).UnixNano()))
	ab, _ := addr.Unmap().MarshalBinary()
	ad := append([]byte("N"), ab...)
	nonce := make([]byte, t.aead.NonceSize(), t.aead.NonceSize()+len(pt)+16)
	rand.Read(nonce)
	return append([]byte{addressTokenMark}, t.aead.Seal(nonce, nonce, pt, ad)...)
}

// openAddressToken reports whether tok is a valid NEW_TOKEN token for
// addr.
func (t *tokenProtector) openAddressToken(now time.Time, addr netip.Addr, tok []byte) bool {
	if len(tok) == 0 || tok[0] != addressTokenMark {
		return false
	}
	tok = tok[1:]
	ns := t.aead.NonceSize()
	if len(tok) < ns+16 {
		return false
	}
	ab, _ := addr.Unmap().MarshalBinary()
	pt, err := t.aead.Open(nil, tok[:ns], tok[ns:], append([]byte("N"), ab...))
	if err != nil || len(pt) != 8 {
		return false
	}
	return now.UnixNano() <= int64(binary.BigEndian.Uint64(pt))
}

// resetToken derives the stateless reset token of one of our connection
// IDs (RFC 9000 §10.3.2).
func (e *Endpoint) resetToken(cid []byte) [16]byte {
	m := hmac.New(sha256.New, e.resetSalt[:])
	m.Write(cid)
	var t [16]byte
	copy(t[:], m.Sum(nil))
	return t
}

// supportsVersion reports whether the server accepts v.
func (e *Endpoint) supportsVersion(v uint32) bool {
	for _, x := range e.config.versions(false) {
		if x == v {
			return true
		}
	}
	return false
}

// handleUnknownLong handles a long-header datagram for no known
// connection: Version Negotiation, Retry, or a new connection.
func (e *Endpoint) handleUnknownLong(d *datagram, dcid []byte) {
	b := d.b
	if len(b) < 7 {
		d.release()
		return
	}
	version := binary.BigEndian.Uint32(b[1:5])
	if version == 0 {
		d.release()
		return
	}
	if !e.supportsVersion(version) {
		// RFC 9000 §6.1: "If the version selected by the client is not
		// acceptable to the server, the server responds with a Version
		// Negotiation packet" — only to datagrams large enough to be an
		// Initial (§14.1: "A server MUST discard an Initial packet that is
		// carried in a UDP datagram with a payload that is smaller than
		// the smallest allowed maximum datagram size of 1200 bytes").
		if len(b) >= minInitialDatagramSize {
			e.sendVersionNegotiation(d)
		}
		d.release()
		return
	}
	h, err := wire.ParseHeader(b, e.cidLen)
	if err != nil || h.Type != wire.PacketTypeInitial || len(b) < minInitialDatagramSize {
		// RFC 9000 §14.1: the server MUST discard small Initials; other
		// packet types for unknown connections are dropped.
		d.release()
		return
	}
	// RFC 9000 §7.2: "When an Initial packet is sent by a client that has
	// not previously received an Initial or Retry packet from the server,
	// the client populates the Destination Connection ID field with an
	// unpredictable value. This Destination Connection ID MUST be at least
	// 8 bytes in length."
	if len(h.DCID) < 8 {
		d.release()
		return
	}
	// RFC 9000 §17.2: a zero QUIC bit is valid only when we advertise
	// grease_quic_bit (RFC 9287), as the connection would.
	if !h.FixedBit && e.config.DisableGreaseQUICBit {
		d.release()
		return
	}
	// Only a packet that authenticates with the Initial keys of its DCID
	// creates state: stray or forged datagrams are dropped here.
	if !initialOpens(version, b[:h.PacketLen], &h) {
		d.release()
		return
	}
	now := time.Now()
	odcid := h.DCID
	var retrySCID []byte
	// A token from an earlier connection's NEW_TOKEN validates the address
	// (RFC 9000 §8.1.3); an invalid one is ignored: "If the token is
	// invalid, the server SHOULD proceed as if the client did not have a
	// validated address".
	validated := len(h.Token) > 0 && e.tokens.openAddressToken(now, d.addr.Addr(), h.Token)
	if e.config.RequireRetry && !validated {
		if len(h.Token) == 0 || h.Token[0] != retryTokenMark {
			// No token, or one that is not a Retry token of ours (an
			// expired NEW_TOKEN token, another server's): RFC 9000 §8.1.3
			// "If the token is invalid, then the server SHOULD proceed as
			// if the client did not have a validated address, including
			// potentially sending a Retry packet."
			e.sendRetry(now, d, &h)
			d.release()
			return
		}
		o, r, ok := e.tokens.open(now, d.addr, h.Token[1:])
		if !ok || !bytes.Equal(r, h.DCID) {
			// RFC 9000 §8.1.2: a server receiving an invalid Retry token
			// "MUST either discard the packet or send a connection error
			// of type INVALID_TOKEN"; we discard.
			d.release()
			return
		}
		odcid, retrySCID = o, r
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		d.release()
		return
	}
	c, err := newServerConn(e, d.addr, version, odcid, h.DCID, h.SCID, retrySCID, validated, d)
	if err != nil {
		d.release()
		return
	}
	_ = c
}

// newServerConn creates the server side of a connection from the
// client's first Initial.
func newServerConn(e *Endpoint, addr netip.AddrPort, version uint32, odcid, dcid, scid, retrySCID []byte, validated bool, first *datagram) (*Conn, error) {
	cfg := e.config
	return newConnWith(e, cfg, false, addr, func(c *Conn) {
		c.version = version
		c.origVersion = version
		c.origDCID = append([]byte(nil), odcid...)
		c.initialDCID = append([]byte(nil), dcid...)
		c.peerCID = append([]byte(nil), scid...)
		c.peerInitSCID = c.peerCID
		c.gotPeerPacket = true
		if retrySCID != nil {
			c.retrySCID = append([]byte(nil), retrySCID...)
			// RFC 9000 §8.1.2: a valid token validates the address.
			c.addrValidated = true
		}
		if validated {
			c.addrValidated = true
		}
	}, first)
}

func (e *Endpoint) sendVersionNegotiation(d *datagram) {
	h, err := wire.ParseHeader(d.b, e.cidLen)
	_ = err
	if h.DCID == nil && len(d.b) > 6 {
		return
	}
	var vs []wire.Version
	for _, v := range e.config.versions(false) {
		vs = append(vs, wire.Version(v))
	}
	// Greasing (RFC 9000 §6.3): include a random reserved version
	// (0x?a?a?a?a), never the one the client chose, which would make it
	// ignore the packet (§6.2).
	var rb [4]byte
	rand.Read(rb[:])
	grease := binary.BigEndian.Uint32(rb[:])&0xf0f0f0f0 | 0x0a0a0a0a
	if grease == uint32(h.Version) {
		grease ^= 0x10000000
	}
	vs = append(vs, wire.Version(grease))
	var first [1]byte
	rand.Read(first[:])
	// RFC 9000 §17.2.1: the server MUST copy the client's SCID into the
	// DCID field and its DCID into the SCID field.
	b := wire.AppendVersionNegotiation(nil, first[0]|0x80, h.SCID, h.DCID, vs...)
	e.writeTo(b, d.addr)
}

// retryTokenMark starts every Retry token and addressTokenMark every
// NEW_TOKEN token, so that the server tells them apart and from tokens it
// never issued (RFC 9000 §8.1.3: "Tokens provided with NEW_TOKEN frames
// and Retry packets can be distinguished by servers").
const (
	retryTokenMark   = 'R'
	addressTokenMark = 'N'
)

// sendRetry answers an Initial without a token with a Retry (RFC 9000
// §17.2.5).
func (e *Endpoint) sendRetry(now time.Time, d *datagram, h *wire.Header) {
	rscid := newCID(defaultConnIDLen)
	tok := append([]byte{retryTokenMark}, e.tokens.seal(now, d.addr, h.DCID, rscid)...)
	r := wire.Retry{Version: h.Version, DCID: h.SCID, SCID: rscid, Token: tok}
	b := r.AppendWithoutTag(nil)
	b, err := protect.AppendRetryIntegrityTag(uint32(h.Version), h.DCID, b)
	if err != nil {
		return
	}
	e.writeTo(b, d.addr)
}

// initialOpens reports whether the Initial packet pkt (its header parsed
// into h) decrypts with the client Initial keys of its DCID. It works on a
// copy: the datagram is processed again by the connection.
func initialOpens(version uint32, pkt []byte, h *wire.Header) bool {
	// Only the client's keys: the server's would be derived for nothing.
	cs, _ := protect.InitialSecrets(version, h.DCID)
	if cs == nil {
		return false
	}
	ck, err := protect.NewKeys(version, protect.InitialSuite, cs)
	if err != nil {
		return false
	}
	b := append([]byte(nil), pkt...)
	pnLen, err := ck.HeaderProtector().Remove(b, h.PNOffset, true)
	if err != nil {
		return false
	}
	pn := wire.ReadPacketNumber(b[h.PNOffset:], pnLen)
	_, err = ck.OpenPacket(b, h.PNOffset+pnLen, wire.DecodePacketNumber(wire.NoPacketNumber, pn, pnLen*8))
	return err == nil
}
