package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Stream error codes the server uses when it cannot answer an hq-interop
// request. hq-interop defines none, so these borrow HTTP/3's meanings.
const (
	codeRequestRejected quic.StreamErrorCode = 0x10b // H3_REQUEST_REJECTED
	codeInternal        quic.StreamErrorCode = 0x102 // H3_INTERNAL_ERROR
)

// maxRequestLen bounds an hq-interop request line; real ones are a path.
const maxRequestLen = 4096

// quicConfig is the quic.Config shared by both roles.
func quicConfig(cfg *config) (*quic.Config, error) {
	qc := &quic.Config{
		Versions:        cfg.versions,
		EnableDatagrams: true,
		// The multiplexing test opens 1,999 streams; the contract wants
		// initial_max_streams_bidi at most 1000, so keep quic-go's 100 and
		// let it raise the limit as streams finish.
		MaxIncomingStreams: 100,
	}
	enableResetStreamAt(qc)
	if cfg.qlogDir != "" {
		if err := os.MkdirAll(cfg.qlogDir, 0o755); err != nil {
			return nil, fmt.Errorf("qlog: %w", err)
		}
		// quic-go's default tracer writes into $QLOGDIR.
		if err := os.Setenv("QLOGDIR", cfg.qlogDir); err != nil {
			return nil, err
		}
		if err := setQlogTracer(qc); err != nil {
			return nil, err
		}
	}
	return qc, nil
}

func runServer(ctx context.Context, cfg *config) error {
	cert, err := tls.LoadX509KeyPair(cfg.certFile, cfg.keyFile)
	if err != nil {
		return fmt.Errorf("load certificate: %w", err)
	}
	tlsConf, closeKeyLog, err := baseTLSConfig(cfg, alpnHQ, alpnH3)
	if err != nil {
		return err
	}
	defer closeKeyLog()
	tlsConf.Certificates = []tls.Certificate{cert}
	if cfg.testcase == "chacha20" {
		// The chacha20 test wants a client that offers only ChaCha20; refuse
		// any other so that a wrong client is caught here too.
		tlsConf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if len(hello.CipherSuites) == 1 && hello.CipherSuites[0] == tls.TLS_CHACHA20_POLY1305_SHA256 {
				return nil, nil
			}
			return nil, errors.New("chacha20 test: client must offer only TLS_CHACHA20_POLY1305_SHA256")
		}
	}
	qc, err := quicConfig(cfg)
	if err != nil {
		return err
	}
	// A server accepts 0-RTT whenever a client offers it, as deployed
	// servers do; whether to try it is the client's choice.
	qc.Allow0RTT = true

	udpAddr, err := net.ResolveUDPAddr("udp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen address %s: %w", cfg.listen, err)
	}
	udp, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.listen, err)
	}
	tr := &quic.Transport{Conn: udp}
	if cfg.retry {
		forceRetry(tr, qc)
	}
	defer tr.Close()
	ln, err := tr.ListenEarly(tlsConf, qc)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.listen, err)
	}
	defer ln.Close()

	h3 := &http3.Server{Handler: fileHandler(cfg.root)}
	defer h3.Close()

	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped by SIGTERM or SIGINT: the contract's normal end.
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		switch conn.ConnectionState().TLS.NegotiatedProtocol {
		case alpnH3:
			go func() {
				// Errors here are the connection's end, which the peer chose.
				_ = h3.ServeQUICConn(conn)
			}()
		default:
			go echoDatagrams(ctx, conn)
			go serveHQ(ctx, conn, cfg.root)
		}
	}
}

// serveHQ answers hq-interop requests: each client-initiated bidirectional
// stream carries "GET /path\r\n" and FIN, and gets the file's bytes and FIN.
func serveHQ(ctx context.Context, conn quicConn, root string) {
	for {
		s, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		go func() {
			if err := serveHQStream(s, root); err != nil {
				fmt.Fprintf(os.Stderr, "quicgo-peer: hq-interop stream %d from %s: %v\n", s.StreamID(), conn.RemoteAddr(), err)
			}
		}()
	}
}

func serveHQStream(s quicStream, root string) error {
	req, err := io.ReadAll(io.LimitReader(s, maxRequestLen+1))
	if err != nil {
		s.CancelWrite(codeInternal)
		return fmt.Errorf("read request: %w", err)
	}
	name, err := parseHQRequest(req)
	if err != nil {
		s.CancelRead(codeRequestRejected)
		s.CancelWrite(codeRequestRejected)
		return err
	}
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		s.CancelWrite(codeRequestRejected)
		return err
	}
	defer f.Close()
	if _, err := io.Copy(s, f); err != nil {
		s.CancelWrite(codeInternal)
		return fmt.Errorf("send %s: %w", name, err)
	}
	return s.Close()
}

// parseHQRequest returns the file name asked for by an HTTP/0.9 request
// line, refusing any that would leave the served folder.
func parseHQRequest(req []byte) (string, error) {
	if len(req) > maxRequestLen {
		return "", errors.New("request too long")
	}
	line := bytes.TrimRight(req, "\r\n")
	path, ok := bytes.CutPrefix(line, []byte("GET /"))
	if !ok {
		return "", fmt.Errorf("request %q: want \"GET /path\\r\\n\"", line)
	}
	name := string(path)
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("request %q: path leaves the served folder", line)
	}
	return name, nil
}

// fileHandler serves the files under root over HTTP/3, without the
// directory listings and redirects of http.FileServer.
func fileHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		if !filepath.IsLocal(name) {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = io.Copy(w, f)
		}
	})
}
