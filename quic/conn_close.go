package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

type closePhase uint8

const (
	phaseOpen closePhase = iota
	phaseClosing
	phaseDraining
)

// closeState is the end of a connection (RFC 9000 §10.2).
type closeState struct {
	phase       closePhase
	deadline    time.Time
	done        bool // the loop must exit
	sendPending bool
	frame       wire.ConnectionCloseFrame
	recvCount   int
	sentSignal  chan struct{} // closed once the CONNECTION_CLOSE left
}

func (s *closeState) active() bool { return s.phase != phaseOpen }

func (s *closeState) signalSent() {
	if s.sentSignal != nil {
		select {
		case <-s.sentSignal:
		default:
			close(s.sentSignal)
		}
	}
}

// closeLocal starts closing the connection because of err, found locally
// or asked by the application.
func (c *Conn) closeLocal(now time.Time, err error) {
	if c.closing.active() {
		return
	}
	f := &c.closing.frame
	switch e := err.(type) {
	case *TransportError:
		e.Remote = false
		f.Application = false
		f.ErrorCode = uint64(e.Code)
		f.FrameType = wire.FrameType(e.FrameType)
		f.Reason = []byte(e.Reason)
	case *ApplicationError:
		e.Remote = false
		f.Application = true
		f.ErrorCode = e.Code
		f.Reason = []byte(e.Reason)
	default:
		f.ErrorCode = uint64(wire.InternalError)
		f.Reason = []byte(err.Error())
	}
	if len(f.Reason) > 256 {
		f.Reason = f.Reason[:256]
	}
	c.closeErr = err
	c.closing.phase = phaseClosing
	// RFC 9000 §10.2: "The closing and draining connection states exist
	// to ensure that connections close cleanly ... and last at least three
	// times the current PTO interval".
	c.closing.deadline = now.Add(3 * c.loss.pto())
	c.closing.sendPending = true
	c.streams.closeAll(err)
}

// handlePeerClose enters the draining state on the peer's
// CONNECTION_CLOSE. RFC 9000 §10.2.2: "An endpoint that receives a
// CONNECTION_CLOSE frame MAY send a single packet containing a
// CONNECTION_CLOSE frame before entering the draining state"; we do not.
func (c *Conn) handlePeerClose(now time.Time, f *wire.ConnectionCloseFrame) {
	if f.Application {
		c.closeErr = &ApplicationError{Code: f.ErrorCode, Reason: string(f.Reason), Remote: true}
	} else {
		c.closeErr = &TransportError{Code: wire.TransportErrorCode(f.ErrorCode), FrameType: uint64(f.FrameType), Reason: string(f.Reason), Remote: true}
	}
	c.closing.phase = phaseDraining
	c.closing.deadline = now.Add(3 * c.loss.pto())
	c.closing.signalSent()
	c.streams.closeAll(c.closeErr)
}

// onPacketWhileClosing answers packets in the closing state. RFC 9000
// §10.2.1: "An endpoint in the closing state sends a packet containing a
// CONNECTION_CLOSE frame in response to any incoming packet ... An
// endpoint SHOULD limit the rate at which it generates packets in the
// closing state": we answer the 1st, 2nd, 4th, 8th... packet.
func (s *closeState) onPacketWhileClosing(now time.Time, c *Conn) {
	if s.phase != phaseClosing {
		return
	}
	s.recvCount++
	if s.recvCount&(s.recvCount-1) == 0 {
		s.sendPending = true
	}
}

// maybeSend sends the CONNECTION_CLOSE in every space we have keys for.
// RFC 9000 §10.2.3: "an endpoint might send a CONNECTION_CLOSE frame in
// multiple packets" before the handshake is confirmed, and "Sending a
// CONNECTION_CLOSE of type 0x1d in an Initial or Handshake packet could
// expose application state or be used to alter application state. A
// CONNECTION_CLOSE of type 0x1d MUST be replaced by a CONNECTION_CLOSE of
// type 0x1c when sending the frame in Initial or Handshake packets ...
// Endpoints MUST clear the value of the Reason Phrase field and SHOULD use
// the APPLICATION_ERROR code when converting to a CONNECTION_CLOSE of type
// 0x1c."
func (s *closeState) maybeSend(now time.Time, c *Conn) {
	if !s.sendPending || s.phase != phaseClosing {
		return
	}
	s.sendPending = false
	defer s.signalSent()
	buf := c.sendBuf[:0]
	type pk struct {
		space          spaceID
		start, pnOff   int
		lenOff, endOff int
		pn             uint64
	}
	var pks [numSpaces]pk
	n := 0
	hasInitial := false
	for sp := initialSpace; sp < numSpaces; sp++ {
		space := &c.spaces[sp]
		above := c.config.CloseAboveInitial
		if sp == appSpace {
			if c.appKeys.Write() == nil || !c.handshakeComplete && !above {
				continue
			}
		} else if !space.canWrite() {
			continue
		}
		if above && sp == initialSpace && c.spaces[handshakeSpace].canWrite() {
			// Config.CloseAboveInitial: RFC 9000 §10.2.3 "Generally, this
			// means sending the frame in a packet with the highest level
			// of packet protection".
			continue
		}
		if n > 0 {
			buf = append(buf, make([]byte, 16)...)
		}
		p := pk{space: sp, start: len(buf), lenOff: -1, pn: space.nextPN}
		space.nextPN++
		if sp == appSpace {
			h := wire.ShortHeader{DCID: c.peerCID, PacketNumber: p.pn, PNLen: 4, KeyPhase: c.appKeys.Phase() == 1}
			buf, p.pnOff = h.Append(buf)
		} else {
			h := wire.LongHeader{Version: wire.Version(c.version), Type: sp.packetType(), DCID: c.peerCID, SCID: c.localCID, PacketNumber: p.pn, PNLen: 4, LengthLen: 2}
			if sp == initialSpace && c.isClient {
				h.Token = c.retryToken
			}
			buf, p.lenOff, p.pnOff = h.Append(buf)
		}
		f := s.frame
		if sp != appSpace && f.Application {
			f = wire.ConnectionCloseFrame{ErrorCode: uint64(wire.ApplicationError)}
		}
		buf = f.Append(buf)
		if sp == initialSpace && c.isClient {
			hasInitial = true
		}
		for len(buf)-p.pnOff < 4 {
			buf = append(buf, 0)
		}
		p.endOff = len(buf)
		pks[n] = p
		n++
	}
	if n == 0 {
		return
	}
	// RFC 9000 §14.1: "A client MUST expand the payload of all UDP
	// datagrams carrying Initial packets to at least the smallest allowed
	// maximum datagram size of 1200 bytes by adding PADDING frames to the
	// Initial packet or by coalescing the Initial packet". The padding goes
	// in the last packet, so that the datagram is exactly 1200 bytes and
	// fits the size allowed before the handshake is confirmed; padding the
	// Initial packet alone made an Initial+Handshake close too large to
	// send, and a client failing its handshake closed in silence.
	if hasInitial {
		for len(buf)+16 < minInitialDatagramSize {
			buf = append(buf, 0)
		}
		pks[n-1].endOff = len(buf)
	}
	buf = append(buf, make([]byte, 16)...)
	for i := 0; i < n; i++ {
		p := pks[i]
		if p.lenOff >= 0 {
			wire.PutVarintLen(buf[p.lenOff:], uint64(p.endOff-p.pnOff+16), 2)
		}
		pkt := buf[p.start : p.endOff : p.endOff+16]
		var err error
		if p.space == appSpace {
			_, err = c.appKeys.Write().SealPacket(pkt, p.pnOff-p.start, p.pn)
		} else {
			_, err = c.spaces[p.space].writeKeys.SealPacket(pkt, p.pnOff-p.start, p.pn)
		}
		if err != nil {
			return
		}
	}
	if allowance := c.amplificationAllowance(); allowance < len(buf) {
		return
	}
	c.writeDatagram(buf, 0)
}
