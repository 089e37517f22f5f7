package qlog

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Version and format written in every header.
const (
	QlogVersion = "0.3"
	QlogFormat  = "JSON-SEQ"
)

// recordSeparator starts every JSON-SEQ record (RFC 7464).
const recordSeparator = 0x1e

// Vantage is the point of view of a trace.
type Vantage string

// Vantage points.
const (
	VantageClient  Vantage = "client"
	VantageServer  Vantage = "server"
	VantageNetwork Vantage = "network"
)

// Trace describes the header of a trace.
type Trace struct {
	Title       string
	Description string
	Vantage     Vantage
	// ODCID is the Original Destination Connection ID, which qvis and the
	// interop runner use to match client and server traces.
	ODCID []byte
	// ReferenceTime is the zero of every event's relative time. Zero means
	// the time NewWriter is called.
	ReferenceTime time.Time
}

// Writer encodes events as a qlog 0.3 JSON-SEQ trace. It buffers its output;
// call Close (or Flush) to push it out. It is safe for concurrent use, though
// normally only the owning connection's loop records to it.
type Writer struct {
	mu     sync.Mutex
	bw     *bufio.Writer
	closer io.Closer // set when the Writer owns the file
	ref    time.Time
	buf    []byte
	err    error
	closed bool
}

// NewWriter writes the header of trace t to w and returns a Writer for its
// events.
func NewWriter(w io.Writer, t Trace) (*Writer, error) {
	if t.ReferenceTime.IsZero() {
		t.ReferenceTime = time.Now()
	}
	qw := &Writer{bw: bufio.NewWriterSize(w, 64<<10), ref: t.ReferenceTime, buf: make([]byte, 0, 1024)}
	qw.buf = appendHeader(qw.buf[:0], &t)
	if _, err := qw.bw.Write(qw.buf); err != nil {
		return nil, fmt.Errorf("qlog: write header: %w", err)
	}
	return qw, nil
}

func appendHeader(b []byte, t *Trace) []byte {
	b = append(b, recordSeparator)
	e := enc{b: b}
	e.open()
	e.str("qlog_version", QlogVersion)
	e.str("qlog_format", QlogFormat)
	e.optStr("title", t.Title)
	e.optStr("description", t.Description)
	e.objectStart("trace")
	e.objectStart("vantage_point")
	v := t.Vantage
	if v == "" {
		v = "unknown"
	}
	e.str("type", string(v))
	e.close()
	e.objectStart("common_fields")
	if t.ODCID != nil {
		e.hex("ODCID", t.ODCID)
		// group_id lets qvis group the client and server traces of one
		// connection, as other implementations do.
		e.hex("group_id", t.ODCID)
	}
	e.str("protocol_type", "QUIC")
	e.key("reference_time")
	// Milliseconds since the epoch as a number: qvis computes absolute
	// times by adding it to each relative time.
	ref := float64(t.ReferenceTime.UnixNano()) / float64(time.Millisecond)
	e.b = strconv.AppendFloat(e.b, ref, 'f', -1, 64)
	e.str("time_format", "relative")
	e.close()
	e.close()
	e.close()
	return append(e.b, '\n')
}

// Enabled reports whether the Writer still accepts events: false after
// Close or after a write error.
func (w *Writer) Enabled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed && w.err == nil
}

// Record encodes ev with its time relative to the trace's reference time.
// Write errors are kept and reported by Err, Flush and Close, because the
// engine has no use for a qlog error at the point of the event.
func (w *Writer) Record(now time.Time, ev Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.err != nil {
		return
	}
	b := append(w.buf[:0], recordSeparator)
	b = append(b, `{"time":`...)
	b = appendMillis(b, now.Sub(w.ref))
	b = append(b, `,"name":`...)
	b = appendQuoted(b, ev.Name())
	b = append(b, `,"data":`...)
	b = ev.AppendData(b)
	b = append(b, '}', '\n')
	w.buf = b
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("qlog: write event: %w", err)
	}
}

// Err returns the first write error, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Flush writes buffered events to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("qlog: flush: %w", err)
	}
	return w.err
}

// Close flushes the trace and, for a Writer made by NewFileWriter, closes
// the file. Later events are dropped. Close is idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	err := w.flushLocked()
	if w.closer != nil {
		if cerr := w.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("qlog: close: %w", cerr)
			w.err = err
		}
	}
	return err
}

// FileName returns the name of the qlog file for a connection:
// "<odcid hex>_<client|server>.sqlog", the convention of the interop runner
// and of other implementations writing to QLOGDIR.
func FileName(odcid []byte, v Vantage) string {
	return hex.EncodeToString(odcid) + "_" + string(v) + ".sqlog"
}

// NewFileWriter creates dir if needed and starts a trace in
// dir/FileName(odcid, v), with the reference time set to now.
func NewFileWriter(dir string, odcid []byte, v Vantage) (*Writer, error) {
	if v != VantageClient && v != VantageServer {
		return nil, fmt.Errorf("qlog: vantage point must be client or server, not %q", v)
	}
	if len(odcid) == 0 {
		return nil, errors.New("qlog: an original destination connection ID is needed to name the file")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, FileName(odcid, v)))
	if err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	w, err := NewWriter(f, Trace{Title: "quiver " + string(v), Vantage: v, ODCID: odcid})
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer = f
	return w, nil
}
