package quic

import (
	"encoding/binary"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TLS handshake message types that may follow the handshake (RFC 8446
// §4: HandshakeType).
const (
	tlsMsgNewSessionTicket   = 4
	tlsMsgCertificateRequest = 13
	tlsMsgKeyUpdate          = 24
)

// TLS alerts the reader reports (RFC 8446 §6), carried as CRYPTO_ERROR
// 0x0100 + alert (RFC 9001 §4.8).
const (
	alertUnexpectedMessage = 10
	alertDecodeError       = 50
)

// maxPostHandshakeMsg bounds one post-handshake message, as crypto/tls
// bounds every handshake message but certificates (maxHandshake, 64 KiB).
const maxPostHandshakeMsg = 1 << 16

// postHandshakeReader takes over the 1-RTT CRYPTO stream from crypto/tls
// once the handshake is confirmed and the connection has no use for TLS
// any more (no session cache to store tickets in), so that an idle
// connection does not keep crypto/tls's state: its record-layer AEADs,
// handshake buffer, transcript and configuration copy (releaseTLS).
//
// What may still arrive after the handshake is checked as TLS would, and as
// RFC 9001 asks of QUIC:
//   - NewSessionTicket, from a server only; a client without a session
//     cache drops it, as crypto/tls does, after checking its framing and its
//     early_data extension (RFC 9001 §4.6.1: "A client MUST treat receipt of
//     a NewSessionTicket that contains an early_data extension with any other
//     value [than 0xffffffff] as a connection error of type
//     PROTOCOL_VIOLATION.");
//   - KeyUpdate: RFC 9001 §6: "Endpoints MUST treat the receipt of a TLS
//     KeyUpdate message as a connection error of type 0x010a, equivalent to
//     a fatal TLS alert of unexpected_message";
//   - CertificateRequest, at a client: RFC 9001 §4.4: "clients MUST treat
//     receipt of such messages as a connection error of type
//     PROTOCOL_VIOLATION";
//   - anything else is an unexpected_message alert (RFC 8446 §4.6 lists
//     the post-handshake messages).
type postHandshakeReader struct {
	buf []byte // an incomplete message, held until its rest arrives
}

// feed takes the next in-order bytes of the 1-RTT CRYPTO stream and checks
// every complete message in them. isClient tells which end reads.
func (r *postHandshakeReader) feed(data []byte, isClient bool) *TransportError {
	b := data
	if len(r.buf) > 0 {
		r.buf = append(r.buf, data...)
		b = r.buf
	}
	for len(b) >= 4 {
		n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if n > maxPostHandshakeMsg {
			return localTransportError(wire.CryptoBufferExceeded, uint64(wire.FrameTypeCrypto), "post-handshake TLS message of %d bytes, more than %d", n, maxPostHandshakeMsg)
		}
		if len(b) < 4+n {
			break
		}
		if err := checkPostHandshakeMsg(b[0], b[4:4+n], isClient); err != nil {
			return err
		}
		b = b[4+n:]
	}
	// Keep what is left of an incomplete message, in a buffer of its own
	// (data belongs to the caller) that goes when the message completes.
	switch {
	case len(b) == 0:
		r.buf = nil
	case len(r.buf) > 0:
		r.buf = append(r.buf[:0], b...)
	default:
		r.buf = append([]byte(nil), b...)
	}
	return nil
}

// checkPostHandshakeMsg checks one post-handshake message of type typ with
// body body (after the 4-byte header).
func checkPostHandshakeMsg(typ byte, body []byte, isClient bool) *TransportError {
	ft := uint64(wire.FrameTypeCrypto)
	switch {
	case typ == tlsMsgNewSessionTicket && isClient:
		return checkNewSessionTicket(body)
	case typ == tlsMsgKeyUpdate:
		return localTransportError(wire.CryptoError(alertUnexpectedMessage), ft, "RFC 9001 §6: a TLS KeyUpdate message")
	case typ == tlsMsgCertificateRequest && isClient:
		return localTransportError(wire.ProtocolViolation, ft, "RFC 9001 §4.4: a post-handshake TLS CertificateRequest")
	}
	return localTransportError(wire.CryptoError(alertUnexpectedMessage), ft, "unexpected post-handshake TLS message of type %d", typ)
}

// checkNewSessionTicket checks the framing of a NewSessionTicket body (RFC
// 8446 §4.6.1) and the value of its early_data extension:
//
//	struct {
//	    uint32 ticket_lifetime;
//	    uint32 ticket_age_add;
//	    opaque ticket_nonce<0..255>;
//	    opaque ticket<1..2^16-1>;
//	    Extension extensions<0..2^16-2>;
//	} NewSessionTicket;
func checkNewSessionTicket(b []byte) *TransportError {
	ft := uint64(wire.FrameTypeCrypto)
	decodeErr := localTransportError(wire.CryptoError(alertDecodeError), ft, "malformed NewSessionTicket")
	if len(b) < 9 {
		return decodeErr
	}
	b = b[8:]
	nonce := int(b[0])
	if len(b) < 1+nonce+2 {
		return decodeErr
	}
	b = b[1+nonce:]
	ticket := int(binary.BigEndian.Uint16(b))
	if ticket == 0 || len(b) < 2+ticket+2 {
		return decodeErr
	}
	b = b[2+ticket:]
	exts := int(binary.BigEndian.Uint16(b))
	if len(b) != 2+exts {
		return decodeErr
	}
	b = b[2:]
	for len(b) > 0 {
		if len(b) < 4 {
			return decodeErr
		}
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return decodeErr
		}
		if typ == 42 { // early_data (RFC 8446 §4.2)
			if n != 4 {
				return decodeErr
			}
			if v := binary.BigEndian.Uint32(b[4:]); v != 0xffffffff {
				return localTransportError(wire.ProtocolViolation, ft, "RFC 9001 §4.6.1: NewSessionTicket with max_early_data_size %#x", v)
			}
		}
		b = b[4+n:]
	}
	return nil
}

// keepsTLS reports whether the connection needs crypto/tls after the
// handshake: a client with a session cache stores the tickets the server
// sends (crypto/tls derives the resumption secret from them).
func (c *Conn) keepsTLS() bool {
	cfg := c.config.TLSConfig
	return c.isClient && cfg != nil && cfg.ClientSessionCache != nil && !cfg.SessionTicketsDisabled
}

// releaseTLS drops crypto/tls's state once the handshake is confirmed
// (and, at a server, the session ticket is written), unless the connection
// still needs it (keepsTLS); postHandshakeReader reads the 1-RTT CRYPTO
// stream from then on. The TLS state the application sees was taken at
// handshake completion (onHandshakeComplete).
func (c *Conn) releaseTLS() {
	if c.tls == nil || !c.handshakeComplete || !c.handshakeConfirmed || c.keepsTLS() {
		return
	}
	c.tls.Close()
	c.tls = nil
	c.tlsReleased = true
}
