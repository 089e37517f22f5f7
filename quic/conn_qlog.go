package quic

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic/wire"
)

// The qlog hooks cost one nil check when tracing is off; when on, they
// build typed events (allocating, which tracing may).

func (c *Conn) qlogOn() bool { return c.qlog != nil && c.qlog.Enabled() }

func (c *Conn) qlogStarted(now time.Time) {
	if !c.qlogOn() {
		return
	}
	local := netipOf(c.ep.Addr())
	ev := qlog.ConnectionStarted{Src: local, Dst: c.peerAddr, SrcCID: c.localCID, DstCID: c.peerCID}
	if !c.isClient {
		ev.Src, ev.Dst = c.peerAddr, local
		ev.SrcCID, ev.DstCID = c.peerCID, c.localCID
	}
	c.qlog.Record(now, ev)
	c.qlogParametersSet(now, nil, true)
}

func (c *Conn) qlogClosed() {
	if !c.qlogOn() {
		return
	}
	ev := qlog.ConnectionClosed{Owner: qlog.OwnerLocal, Trigger: "error"}
	var te *TransportError
	var ae *ApplicationError
	switch err := c.closeErr; {
	case errors.As(err, &te):
		ev.Code, ev.Reason = uint64(te.Code), te.Reason
		if te.Remote {
			ev.Owner = qlog.OwnerRemote
		}
		if te.Code == wire.NoError {
			ev.Trigger = "clean"
		}
	case errors.As(err, &ae):
		ev.Application, ev.Code, ev.Reason, ev.Trigger = true, ae.Code, ae.Reason, "application"
		if ae.Remote {
			ev.Owner = qlog.OwnerRemote
		}
	case errors.As(err, new(IdleTimeoutError)):
		ev.Trigger = "idle_timeout"
	case errors.As(err, new(*VersionNegotiationError)):
		ev.Trigger = "version_mismatch"
	}
	c.qlog.Record(time.Now(), ev)
}

var keyTypes = map[tls.QUICEncryptionLevel][2]qlog.KeyType{
	tls.QUICEncryptionLevelInitial:     {qlog.KeyClientInitial, qlog.KeyServerInitial},
	tls.QUICEncryptionLevelEarly:       {qlog.KeyClient0RTT, qlog.KeyServer0RTT},
	tls.QUICEncryptionLevelHandshake:   {qlog.KeyClientHandshake, qlog.KeyServerHandshake},
	tls.QUICEncryptionLevelApplication: {qlog.KeyClient1RTT, qlog.KeyServer1RTT},
}

func (c *Conn) qlogKeyUpdated(now time.Time, level tls.QUICEncryptionLevel, write bool, trigger string) {
	if !c.qlogOn() {
		return
	}
	kt := keyTypes[level][1]
	if c.isClient == write {
		kt = keyTypes[level][0]
	}
	ev := qlog.KeyUpdated{KeyType: kt, Trigger: trigger}
	if level == tls.QUICEncryptionLevelApplication {
		ev.Generation = c.appKeys.Generation()
	}
	c.qlog.Record(now, ev)
}

func qlogPacketType(t wire.PacketType) qlog.PacketType {
	switch t {
	case wire.PacketTypeInitial:
		return qlog.PacketTypeInitial
	case wire.PacketTypeHandshake:
		return qlog.PacketTypeHandshake
	case wire.PacketType0RTT:
		return qlog.PacketType0RTT
	case wire.PacketType1RTT:
		return qlog.PacketType1RTT
	case wire.PacketTypeRetry:
		return qlog.PacketTypeRetry
	case wire.PacketTypeVersionNegotiation:
		return qlog.PacketTypeVersionNegotiation
	}
	return qlog.PacketTypeUnknown
}

// qlogFrames describes the frames of a plaintext payload.
func qlogFrames(payload []byte) []qlog.FrameInfo {
	var p wire.Parser
	var out []qlog.FrameInfo
	for len(payload) > 0 {
		f, n, err := p.Parse(payload)
		if err != nil {
			break
		}
		payload = payload[n:]
		out = append(out, frameInfo(f))
	}
	return out
}

func frameInfo(f wire.Frame) qlog.FrameInfo {
	switch f := f.(type) {
	case *wire.PaddingFrame:
		return qlog.FrameInfo{FrameType: qlog.FramePadding, Length: uint64(f.Length)}
	case *wire.PingFrame:
		return qlog.FrameInfo{FrameType: qlog.FramePing}
	case *wire.AckFrame:
		fi := qlog.FrameInfo{FrameType: qlog.FrameAck, ECT0: f.ECT0, ECT1: f.ECT1, CE: f.ECNCE}
		for _, r := range f.Ranges {
			fi.AckedRanges = append(fi.AckedRanges, qlog.AckRange{First: r.Smallest, Last: r.Largest})
		}
		return fi
	case *wire.CryptoFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameCrypto, Offset: f.Offset, Length: uint64(len(f.Data))}
	case *wire.StreamFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameStream, StreamID: f.StreamID, Offset: f.Offset, Length: uint64(len(f.Data)), Fin: f.Fin}
	case *wire.ResetStreamFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameResetStream, StreamID: f.StreamID, ErrorCode: f.ErrorCode, FinalSize: f.FinalSize, ErrorSpace: qlog.ErrorSpaceApplication}
	case *wire.StopSendingFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameStopSending, StreamID: f.StreamID, ErrorCode: f.ErrorCode, ErrorSpace: qlog.ErrorSpaceApplication}
	case *wire.MaxDataFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameMaxData, Maximum: f.Maximum}
	case *wire.MaxStreamDataFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameMaxStreamData, StreamID: f.StreamID, Maximum: f.Maximum}
	case *wire.MaxStreamsFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameMaxStreams, Maximum: f.Maximum, StreamType: streamType(f.Bidi)}
	case *wire.DataBlockedFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameDataBlocked, Limit: f.Limit}
	case *wire.StreamDataBlockedFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameStreamDataBlocked, StreamID: f.StreamID, Limit: f.Limit}
	case *wire.StreamsBlockedFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameStreamsBlocked, Limit: f.Limit, StreamType: streamType(f.Bidi)}
	case *wire.NewConnectionIDFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameNewConnectionID, SequenceNumber: f.SequenceNumber, RetirePriorTo: f.RetirePriorTo, ConnectionID: f.ConnectionID, StatelessResetToken: f.StatelessResetToken[:]}
	case *wire.RetireConnectionIDFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameRetireConnectionID, SequenceNumber: f.SequenceNumber}
	case *wire.PathChallengeFrame:
		return qlog.FrameInfo{FrameType: qlog.FramePathChallenge, Data: f.Data[:]}
	case *wire.PathResponseFrame:
		return qlog.FrameInfo{FrameType: qlog.FramePathResponse, Data: f.Data[:]}
	case *wire.ConnectionCloseFrame:
		fi := qlog.FrameInfo{FrameType: qlog.FrameConnectionClose, ErrorCode: f.ErrorCode, Reason: string(f.Reason), TriggerFrameType: uint64(f.FrameType), ErrorSpace: qlog.ErrorSpaceTransport}
		if f.Application {
			fi.ErrorSpace = qlog.ErrorSpaceApplication
		}
		return fi
	case *wire.HandshakeDoneFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameHandshakeDone}
	case *wire.NewTokenFrame:
		return qlog.FrameInfo{FrameType: qlog.FrameNewToken}
	}
	return qlog.FrameInfo{FrameType: qlog.FrameUnknown, RawFrameType: uint64(f.Type())}
}

func streamType(bidi bool) string {
	if bidi {
		return "bidirectional"
	}
	return "unidirectional"
}

func (c *Conn) qlogPacketReceived(now time.Time, info *recvPacketInfo, payload []byte) {
	if !c.qlogOn() {
		return
	}
	h := qlog.PacketHeader{PacketType: qlogPacketType(info.typ), PacketNumber: info.pn, Version: qlog.Version(c.version), DCID: info.header.DCID, SCID: info.header.SCID}
	c.qlog.Record(now, qlog.PacketReceived{Header: h, Frames: qlogFrames(payload), Raw: qlog.RawInfo{Length: uint64(info.size), PayloadLength: uint64(len(payload))}})
}

func (c *Conn) qlogPacketSent(now time.Time, p *builtPacket, buf []byte) {
	if !c.qlogOn() {
		return
	}
	hdrLen := p.pnOff + int(buf[p.start]&3) + 1
	h := qlog.PacketHeader{PacketType: qlogPacketType(p.space.packetType()), PacketNumber: p.pn, Version: qlog.Version(c.version), DCID: c.peerCID, SCID: c.localCID}
	if p.space == appSpace {
		h.KeyPhaseBit = c.appKeys.Phase() == 1
	}
	c.qlog.Record(now, qlog.PacketSent{Header: h, Frames: qlogFrames(buf[hdrLen:p.end]), Raw: qlog.RawInfo{Length: uint64(p.end + 16 - p.start), PayloadLength: uint64(p.end - hdrLen + 16)}})
}

func (c *Conn) qlogPacketLost(now time.Time, space spaceID, pn uint64) {
	if !c.qlogOn() {
		return
	}
	c.qlog.Record(now, qlog.PacketLost{Header: qlog.PacketHeader{PacketType: qlogPacketType(space.packetType()), PacketNumber: pn}})
}

func (c *Conn) qlogPTO(now time.Time, space spaceID) {
	if !c.qlogOn() {
		return
	}
	c.qlogMetrics(now)
}

func (c *Conn) qlogMetrics(now time.Time) {
	if !c.qlogOn() {
		return
	}
	r := c.loss.ld.RTT()
	c.qlog.Record(now, qlog.MetricsUpdated{
		MinRTT: r.Min(), SmoothedRTT: r.Smoothed(), LatestRTT: r.Latest(), RTTVariance: r.RTTVar(),
		PTOCount: uint64(c.loss.ld.PTOCount()), CongestionWindow: uint64(c.loss.cc.CongestionWindow()),
		BytesInFlight: uint64(c.loss.ld.BytesInFlight()),
	})
}

// qlogParametersSet logs our parameters (p nil, local) or the peer's.
func (c *Conn) qlogParametersSet(now time.Time, p *wire.TransportParameters, local bool) {
	if !c.qlogOn() {
		return
	}
	if local {
		var err error
		p, err = wire.ParseTransportParameters(c.localTransportParams(), !c.isClient)
		if err != nil {
			return
		}
	}
	ev := qlog.ParametersSet{
		Owner: qlog.OwnerRemote, InitialSourceConnectionID: p.InitialSourceConnectionID,
		DisableActiveMigration: p.DisableActiveMigration, MaxIdleTimeout: time.Duration(p.MaxIdleTimeout) * time.Millisecond,
		MaxUDPPayloadSize: p.MaxUDPPayloadSize, AckDelayExponent: p.AckDelayExponent, MaxAckDelay: time.Duration(p.MaxAckDelay) * time.Millisecond,
		ActiveConnectionIDLimit: p.ActiveConnectionIDLimit, InitialMaxData: p.InitialMaxData,
		InitialMaxStreamDataBidiLocal: p.InitialMaxStreamDataBidiLocal, InitialMaxStreamDataBidiRemote: p.InitialMaxStreamDataBidiRemote,
		InitialMaxStreamDataUni: p.InitialMaxStreamDataUni, InitialMaxStreamsBidi: p.InitialMaxStreamsBidi, InitialMaxStreamsUni: p.InitialMaxStreamsUni,
	}
	if local {
		ev.Owner = qlog.OwnerLocal
	}
	if p.HasOriginalDestinationConnectionID {
		ev.OriginalDestinationConnectionID = p.OriginalDestinationConnectionID
	}
	if p.HasRetrySourceConnectionID {
		ev.RetrySourceConnectionID = p.RetrySourceConnectionID
	}
	if p.HasStatelessResetToken {
		ev.StatelessResetToken = p.StatelessResetToken[:]
	}
	c.qlog.Record(now, ev)
}

func netipOf(a net.Addr) netip.AddrPort {
	if ua, ok := a.(*net.UDPAddr); ok {
		ap := ua.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}
