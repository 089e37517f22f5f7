package h3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
)

// hq-interop is HTTP/0.9 over QUIC as the QUIC interop runner uses it: the
// client opens a bidirectional stream, writes "GET /path\r\n" and FIN; the
// server writes the file's bytes and FIN.

// MaxHQRequest bounds an hq-interop request line, CRLF included.
const MaxHQRequest = 4096

// HQCodeNotFound is the application error code with which ServeHQ resets a
// stream whose file does not exist or cannot be read. hq-interop defines no
// error codes; a reset (rather than an empty body and FIN) lets the client
// tell "missing" from "empty".
const HQCodeNotFound uint64 = 0x404

// HQCodeBadRequest is the code with which ServeHQ resets and stops a stream
// whose request line is invalid or longer than MaxHQRequest.
const HQCodeBadRequest uint64 = 0x400

// ErrHQBadRequest reports an invalid hq-interop request line.
var ErrHQBadRequest = errors.New("h3: invalid hq-interop request line")

// ParseHQRequest parses an hq-interop request line, "GET /path" followed by
// CRLF, a bare LF, or nothing (when the client's FIN ends the line). It
// returns the file name to open in an fs.FS: cleaned, relative, and never
// outside the root ("GET /" gives "."). Query strings are not interpreted.
func ParseHQRequest(line []byte) (string, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	rest, ok := bytes.CutPrefix(line, []byte("GET "))
	if !ok || len(rest) == 0 || rest[0] != '/' || bytes.ContainsAny(rest, " \r\n\x00") {
		return "", ErrHQBadRequest
	}
	// path.Clean of a rooted path removes every "..": "/../../x" is "/x".
	name := strings.TrimPrefix(path.Clean(string(rest)), "/")
	if name == "" {
		name = "."
	}
	if !fs.ValidPath(name) {
		return "", ErrHQBadRequest
	}
	return name, nil
}

// readHQRequest reads the request line, up to MaxHQRequest bytes, stopping
// at LF or at the end of the stream.
func readHQRequest(r io.Reader) ([]byte, error) {
	buf := make([]byte, MaxHQRequest)
	n := 0
	for {
		if n == len(buf) {
			return nil, ErrHQBadRequest
		}
		m, err := r.Read(buf[n:])
		if i := bytes.IndexByte(buf[n:n+m], '\n'); i >= 0 {
			return buf[:n+i+1], nil
		}
		n += m
		if err == io.EOF {
			return buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ServeHQ serves hq-interop requests on conn from root until ctx is done or
// the connection ends; it then returns the error that ended it (ctx.Err()
// when ctx ended it). Transfers still running when ctx ends are reset; the
// connection itself is left for the caller to close. Use os.DirFS(dir), or better (*os.Root).FS(), which
// also stops symbolic links from leaving the directory.
//
// Each request stream gets the file's bytes and FIN. A missing or
// unreadable file resets the stream with HQCodeNotFound, a directory
// included; a malformed or oversized request line gets STOP_SENDING and
// RESET_STREAM with HQCodeBadRequest.
func ServeHQ(ctx context.Context, conn Conn, root fs.FS) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("h3: hq-interop: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// When ctx ends, abort the transfer so that ServeHQ returns
			// promptly even if the client has stopped reading.
			stop := context.AfterFunc(ctx, func() {
				st.StopSending(0)
				st.Reset(0)
			})
			defer stop()
			serveHQStream(st, root)
		}()
	}
}

// serveHQStream answers one hq-interop request.
func serveHQStream(st Stream, root fs.FS) {
	line, err := readHQRequest(st)
	if err != nil {
		st.StopSending(HQCodeBadRequest)
		st.Reset(HQCodeBadRequest)
		return
	}
	name, err := ParseHQRequest(line)
	if err != nil {
		st.StopSending(HQCodeBadRequest)
		st.Reset(HQCodeBadRequest)
		return
	}
	f, err := root.Open(name)
	if err != nil {
		st.Reset(HQCodeNotFound)
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		st.Reset(HQCodeNotFound)
		return
	}
	if _, err := io.CopyBuffer(onlyWriter{st}, onlyReader{f}, make([]byte, 64<<10)); err != nil {
		st.Reset(HQCodeNotFound)
		return
	}
	st.CloseWrite()
}

// onlyWriter and onlyReader hide ReadFrom/WriteTo so that CopyBuffer uses
// the buffer given to it.
type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// GetHQ fetches path with hq-interop on a new stream of conn and copies the
// body to w. It returns the number of bytes copied. A reset from the server
// (a missing file, with Quiver's server) is returned as an *Error with Remote
// set. Cancelling ctx aborts the transfer.
func GetHQ(ctx context.Context, conn Conn, path string, w io.Writer) (int64, error) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	st, err := conn.OpenStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("h3: hq-interop: open stream: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		st.StopSending(0)
		st.Reset(0)
	})
	defer stop()
	if _, err := io.WriteString(st, "GET "+path+"\r\n"); err != nil {
		return 0, fmt.Errorf("h3: hq-interop: send request: %w", err)
	}
	if err := st.CloseWrite(); err != nil {
		return 0, fmt.Errorf("h3: hq-interop: send request: %w", err)
	}
	n, err := io.CopyBuffer(onlyWriter{w}, onlyReader{st}, make([]byte, 64<<10))
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, fmt.Errorf("h3: hq-interop GET %s: %w", path, peerReset(err))
	}
	return n, nil
}
