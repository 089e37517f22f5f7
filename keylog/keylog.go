package keylog

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// Labels of TLS 1.3 secrets, as draft-ietf-tls-keylogfile defines them.
const (
	ClientEarlyTrafficSecret     = "CLIENT_EARLY_TRAFFIC_SECRET"
	ClientHandshakeTrafficSecret = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
	ServerHandshakeTrafficSecret = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
	ClientTrafficSecret0         = "CLIENT_TRAFFIC_SECRET_0"
	ServerTrafficSecret0         = "SERVER_TRAFFIC_SECRET_0"
	ExporterSecret               = "EXPORTER_SECRET"
)

// ClientRandomLen is the size of the ClientHello random that identifies a
// connection in a key log.
const ClientRandomLen = 32

// maxSecretLen bounds a secret: TLS 1.3 secrets are hash-sized (at most 48
// bytes for SHA-384), and a bound keeps the parser's allocations small.
const maxSecretLen = 64

// Entry is one key log line.
type Entry struct {
	Label        string
	ClientRandom []byte
	Secret       []byte
}

// String formats e as a key log line without the newline.
func (e Entry) String() string { b := e.append(nil); return string(b[:len(b)-1]) }

func (e Entry) append(b []byte) []byte {
	b = append(b, e.Label...)
	b = append(b, ' ')
	b = hex.AppendEncode(b, e.ClientRandom)
	b = append(b, ' ')
	b = hex.AppendEncode(b, e.Secret)
	return append(b, '\n')
}

func (e Entry) key() string { return e.Label + " " + string(e.ClientRandom) }

// Writer writes key log lines to an underlying io.Writer, dropping lines
// whose label and client random were already written. It is safe for
// concurrent use, since crypto/tls and the engine write from different
// goroutines.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]bool
	buf  []byte
	err  error
}

// NewWriter returns a Writer writing to w. Each line is written with one
// Write call, so a file opened with O_APPEND can be shared by processes.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, seen: make(map[string]bool)}
}

// OpenFile opens (creating, or appending to) the key log file at path, the
// way tools treat SSLKEYLOGFILE. Closing the file is the caller's job.
func OpenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("keylog: %w", err)
	}
	return f, nil
}

// Write logs secret for the connection identified by clientRandom. A line
// with the same label and client random as an earlier one is dropped.
func (w *Writer) Write(label string, clientRandom, secret []byte) error {
	if err := checkLabel(label); err != nil {
		return err
	}
	if len(clientRandom) != ClientRandomLen {
		return fmt.Errorf("keylog: client random is %d bytes, want %d", len(clientRandom), ClientRandomLen)
	}
	if len(secret) == 0 {
		return errors.New("keylog: empty secret")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeEntryLocked(Entry{label, clientRandom, secret})
}

func (w *Writer) writeEntryLocked(e Entry) error {
	if w.err != nil {
		return w.err
	}
	k := e.key()
	if w.seen[k] {
		return nil
	}
	w.buf = e.append(w.buf[:0])
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("keylog: %w", err)
		return w.err
	}
	w.seen[k] = true
	return nil
}

// TLSWriter returns an io.Writer for tls.Config.KeyLogWriter. crypto/tls
// hands it complete, formatted lines; valid ones are de-duplicated with the
// lines given to Write, and anything else (comments, unknown shapes) is
// passed through unchanged so that nothing TLS logs is lost. A line split
// across calls is held until its newline arrives.
func (w *Writer) TLSWriter() io.Writer { return &tlsWriter{w: w} }

type tlsWriter struct {
	w       *Writer
	partial []byte
}

func (t *tlsWriter) Write(p []byte) (int, error) {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			t.partial = append(t.partial, data...)
			break
		}
		line := data[:i]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		data = data[i+1:]
		if err := t.w.writeLineLocked(line); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *Writer) writeLineLocked(line []byte) error {
	if e, err := parseLine(string(line)); err == nil {
		return w.writeEntryLocked(e)
	}
	if w.err != nil {
		return w.err
	}
	w.buf = append(append(w.buf[:0], line...), '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("keylog: %w", err)
	}
	return w.err
}

func checkLabel(label string) error {
	if label == "" {
		return errors.New("keylog: empty label")
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("keylog: label %q has characters other than A-Z, 0-9 and _", label)
		}
	}
	return nil
}

// parseLine parses one non-comment line.
func parseLine(line string) (Entry, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return Entry{}, fmt.Errorf("want 3 fields, got %d", len(f))
	}
	if err := checkLabel(f[0]); err != nil {
		return Entry{}, err
	}
	if len(f[1]) != 2*ClientRandomLen {
		return Entry{}, fmt.Errorf("client random has %d hex digits, want %d", len(f[1]), 2*ClientRandomLen)
	}
	cr, err := hex.DecodeString(f[1])
	if err != nil {
		return Entry{}, fmt.Errorf("client random: %w", err)
	}
	if len(f[2]) == 0 || len(f[2]) > 2*maxSecretLen {
		return Entry{}, fmt.Errorf("secret has %d hex digits, want 2 to %d", len(f[2]), 2*maxSecretLen)
	}
	secret, err := hex.DecodeString(f[2])
	if err != nil {
		return Entry{}, fmt.Errorf("secret: %w", err)
	}
	return Entry{Label: f[0], ClientRandom: cr, Secret: secret}, nil
}

// Parse reads a key log. Blank lines and lines starting with '#' are
// skipped; any other malformed line is an error naming its line number,
// because a silently skipped secret shows up much later as an undecryptable
// capture. Labels are not restricted to the TLS 1.3 ones, so TLS 1.2
// CLIENT_RANDOM lines parse too.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return out, fmt.Errorf("keylog: line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("keylog: line %d: %w", n+1, err)
	}
	return out, nil
}

// Merge concatenates key logs, keeping the first entry for each label and
// client random. Pass the client's log first to make its lines win, as the
// interop runner does.
func Merge(logs ...[]Entry) []Entry {
	seen := make(map[string]bool)
	var out []Entry
	for _, l := range logs {
		for _, e := range l {
			if k := e.key(); !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// Format returns entries as key log text, one line each.
func Format(entries []Entry) []byte {
	var b []byte
	for _, e := range entries {
		b = e.append(b)
	}
	return b
}

// ClientRandom returns the random of a ClientHello handshake message, as the
// engine sees it at the start of the client's Initial CRYPTO data:
//
//	msg_type (1 = client_hello) | length (3 bytes) | legacy_version (2) | random (32)
//
// Only the first 38 bytes are needed, so a ClientHello split across CRYPTO
// frames works as soon as its start has arrived. The result is a copy.
func ClientRandom(handshake []byte) ([]byte, error) {
	const (
		clientHello = 1
		start       = 4 + 2 // type, length, legacy_version
	)
	if len(handshake) < start+ClientRandomLen {
		return nil, fmt.Errorf("keylog: %d bytes are too few for a ClientHello random", len(handshake))
	}
	if handshake[0] != clientHello {
		return nil, fmt.Errorf("keylog: handshake message type %d is not client_hello", handshake[0])
	}
	if n := int(handshake[1])<<16 | int(handshake[2])<<8 | int(handshake[3]); n < 2+ClientRandomLen {
		return nil, fmt.Errorf("keylog: ClientHello length %d is too short to hold a random", n)
	}
	return bytes.Clone(handshake[start : start+ClientRandomLen]), nil
}
