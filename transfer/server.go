package transfer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/quiver-quic/quiver/certs"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic"
)

// ServerConfig configures a file server.
type ServerConfig struct {
	// Addr is the UDP address to listen on, e.g. "127.0.0.1:4433".
	Addr string
	// Root is the directory whose files are served. Paths cannot escape it
	// (os.Root confines them, symbolic links included).
	Root string
	// ALPN lists the application protocols offered: "h3", "hq-interop".
	// Default both.
	ALPN []string
	// Retry makes the server validate client addresses with Retry.
	Retry bool
	// Versions lists the QUIC versions accepted (default: the engine's).
	Versions []uint32
	// Certificate is served when set; otherwise a fresh self-signed one.
	Certificate *tls.Certificate
	// QlogDir, when set, receives one qlog file per connection.
	QlogDir string
	// KeyLog, when set, receives the TLS secrets in SSLKEYLOGFILE format.
	KeyLog io.Writer
	// Logf, when set, reports per-connection failures.
	Logf func(format string, args ...any)
	// Probe passes test hooks to the engine (conformance only).
	Probe *quic.Probe
	// Allow0RTT accepts 0-RTT data from clients resuming a session, and
	// issues session tickets that allow it (quic.Config.Allow0RTT).
	Allow0RTT bool
	// PreferredAddress, when set, is served too and offered to clients,
	// which move their connections there after the handshake
	// (quic.Config.PreferredAddress, RFC 9000 §9.6).
	PreferredAddress *quic.PreferredAddress
	// Datagrams selects what the server does with DATAGRAM frames (RFC
	// 9221): DatagramsOff (the default) does not advertise
	// max_datagram_frame_size, DatagramsEcho sends each one back,
	// DatagramsDiscard reads and drops them.
	Datagrams DatagramMode
	// MaxDatagramFrameSize is the max_datagram_frame_size announced when
	// Datagrams is on. Default 65535 (RFC 9221 §3: "For most uses of
	// DATAGRAM frames, it is RECOMMENDED to send a value of 65535").
	MaxDatagramFrameSize uint64
	// EditQUIC, when set, edits the engine configuration before the
	// endpoint opens (the engine's knobs that `quiver serve` exposes as
	// flags: versions, limits, timeouts, ACK frequency, greasing).
	EditQUIC func(*quic.Config)
	// PacketConn, when set, is served instead of a socket on Addr (a
	// socket wrapped to delay what the server sends, for example).
	PacketConn net.PacketConn
}

// DatagramMode is what a server does with the peer's DATAGRAM frames.
type DatagramMode int

// Datagram modes.
const (
	DatagramsOff DatagramMode = iota
	DatagramsEcho
	DatagramsDiscard
)

// ParseDatagramMode reads "off", "echo" or "discard".
func ParseDatagramMode(s string) (DatagramMode, error) {
	switch s {
	case "off", "":
		return DatagramsOff, nil
	case "echo":
		return DatagramsEcho, nil
	case "discard":
		return DatagramsDiscard, nil
	}
	return DatagramsOff, fmt.Errorf("unknown datagram mode %q: use off, echo or discard", s)
}

func (m DatagramMode) String() string {
	return [...]string{"off", "echo", "discard"}[m]
}

// defaultMaxDatagramFrameSize is RFC 9221 §3's recommended value.
const defaultMaxDatagramFrameSize = 65535

// Server serves files over QUIC until its context ends.
type Server struct {
	cfg  ServerConfig
	ep   *quic.Endpoint
	root *os.Root
	h3   *h3.Server
	wg   sync.WaitGroup
}

// DefaultALPN is what a server offers and a client asks for when none is
// given, in order of preference.
var DefaultALPN = []string{h3.ALPNH3, h3.ALPNHQInterop}

// Listen opens the root directory and the UDP socket.
func Listen(cfg ServerConfig) (*Server, error) {
	if len(cfg.ALPN) == 0 {
		cfg.ALPN = DefaultALPN
	}
	for _, p := range cfg.ALPN {
		if p != h3.ALPNH3 && p != h3.ALPNHQInterop {
			return nil, fmt.Errorf("unknown application protocol %q: use h3 or hq-interop", p)
		}
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("serve %s: %w", cfg.Root, err)
	}
	cert := cfg.Certificate
	if cert == nil {
		c, _, err := certs.SelfSigned()
		if err != nil {
			root.Close()
			return nil, err
		}
		cert = &c
	}
	qcfg := &quic.Config{
		TLSConfig:        &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: cfg.ALPN},
		Versions:         cfg.Versions,
		RequireRetry:     cfg.Retry,
		Allow0RTT:        cfg.Allow0RTT,
		KeyLog:           cfg.KeyLog,
		PreferredAddress: cfg.PreferredAddress,
		Probe:            cfg.Probe,
		Tracer:           tracer(cfg.QlogDir, cfg.Logf),
	}
	if cfg.Datagrams != DatagramsOff {
		qcfg.MaxDatagramFrameSize = cfg.MaxDatagramFrameSize
		if qcfg.MaxDatagramFrameSize == 0 {
			qcfg.MaxDatagramFrameSize = defaultMaxDatagramFrameSize
		}
	}
	if cfg.EditQUIC != nil {
		cfg.EditQUIC(qcfg)
	}
	var ep *quic.Endpoint
	if cfg.PacketConn != nil {
		ep, err = quic.NewEndpoint(cfg.PacketConn, qcfg)
	} else {
		ep, err = quic.Listen("udp", cfg.Addr, qcfg)
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, ep: ep, root: root}
	// RFC 9297 §2.1.1: an endpoint tells its peer it is willing to receive
	// HTTP/3 Datagrams with SETTINGS_H3_DATAGRAM = 1, and implementations
	// that can receive them are recommended to always send it. They ride
	// in QUIC DATAGRAM frames, so the setting goes with the
	// max_datagram_frame_size transport parameter (RFC 9221 §3), never
	// without it.
	s.h3 = &h3.Server{Handler: h3.FileHandler(root.FS()), EnableDatagrams: qcfg.MaxDatagramFrameSize > 0}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ep.Addr() }

// Serve accepts connections until ctx ends, then closes the endpoint and
// waits for the connections' handlers to return.
func (s *Server) Serve(ctx context.Context) error {
	defer s.root.Close()
	defer s.wg.Wait()
	defer s.ep.Close()
	for {
		conn, err := s.ep.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		if s.cfg.Datagrams != DatagramsOff {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				serveDatagrams(ctx, conn, s.cfg.Datagrams)
			}()
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.serveConn(ctx, conn); err != nil && s.cfg.Logf != nil {
				s.cfg.Logf("connection from %s: %v", conn.RemoteAddr(), err)
			}
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, conn *quic.Conn) error {
	switch conn.ALPN() {
	case h3.ALPNH3:
		return closedNormally(s.h3.ServeConn(ctx, h3.FromQUIC(conn)))
	case h3.ALPNHQInterop:
		err := h3.ServeHQ(ctx, h3.FromQUIC(conn), s.root.FS())
		if errors.Is(err, context.Canceled) {
			conn.Close(0, "server shutting down")
			return nil
		}
		return closedNormally(err)
	default:
		// TLS refuses a connection without a common protocol before it
		// gets here; this is a guard, not a path.
		conn.Close(0x0178, "no application protocol")
		return fmt.Errorf("no application protocol negotiated")
	}
}

// serveDatagrams reads the connection's DATAGRAM frames until it ends,
// and echoes each (when it fits the peer's max_datagram_frame_size; RFC
// 9221 §3: "An endpoint MUST NOT send DATAGRAM frames that are larger
// than the max_datagram_frame_size value it has received from its peer",
// which SendDatagram enforces) or drops it.
func serveDatagrams(ctx context.Context, conn *quic.Conn, mode DatagramMode) {
	for {
		b, err := conn.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if mode == DatagramsEcho {
			// A datagram above the peer's limit, or a peer without
			// DATAGRAM support, is not echoed: datagrams are unreliable.
			conn.SendDatagram(b)
		}
	}
}

// tracer returns a qlog tracer writing one file per connection into dir,
// or nil when dir is empty.
func tracer(dir string, logf func(string, ...any)) func([]byte, bool) qlog.Recorder {
	if dir == "" {
		return nil
	}
	return func(odcid []byte, isClient bool) qlog.Recorder {
		v := qlog.VantageServer
		if isClient {
			v = qlog.VantageClient
		}
		w, err := qlog.NewFileWriter(dir, odcid, v)
		if err != nil {
			if logf != nil {
				logf("qlog: %v", err)
			}
			return nil
		}
		return w
	}
}

// closedNormally drops the error of a connection that the peer closed
// without an error (application code 0 for hq-interop, H3_NO_ERROR 0x100
// for HTTP/3) or that went idle after its work: neither is a failure.
func closedNormally(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote && (ae.Code == 0 || ae.Code == 0x100) {
		return nil
	}
	var h3e *h3.Error
	if errors.As(err, &h3e) && h3e.Remote && h3e.Code == h3.ErrCodeNoError {
		return nil
	}
	if errors.As(err, new(quic.IdleTimeoutError)) {
		return nil
	}
	return err
}
