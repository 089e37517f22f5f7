package qlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// File is a parsed JSON-SEQ qlog trace.
type File struct {
	Header Header
	Events []Record
}

// Header holds the members of the first record that tools rely on.
type Header struct {
	QlogVersion  string
	QlogFormat   string
	Title        string
	Description  string
	VantagePoint string
	// ODCID is the hex ODCID common field, as written.
	ODCID string
	// ReferenceTime is in milliseconds since the Unix epoch.
	ReferenceTime float64
	TimeFormat    string
	// Raw is the whole header record.
	Raw json.RawMessage
}

// Record is one event, kept generic so that events of any implementation
// and any category can be inspected.
type Record struct {
	// Time is in milliseconds relative to Header.ReferenceTime.
	Time float64
	// Name is "category:type".
	Name string
	// Data is the data member decoded generically (numbers as float64);
	// nil when the event has none.
	Data map[string]any
	// RawData is the data member as written, for typed decoding.
	RawData json.RawMessage
}

// Category returns the part of Name before the colon.
func (r Record) Category() string { c, _, _ := strings.Cut(r.Name, ":"); return c }

// Type returns the part of Name after the colon.
func (r Record) Type() string { _, t, _ := strings.Cut(r.Name, ":"); return t }

// Decode decodes the data member into v, typically a pointer to one of this
// package's event types.
func (r Record) Decode(v any) error {
	data := r.RawData
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("qlog: decode %s: %w", r.Name, err)
	}
	return nil
}

// As decodes r into the event type T after checking that r has T's name,
// for example As[PacketSent](rec).
func As[T Event](r Record) (T, error) {
	var v T
	if want := v.Name(); want != "" && want != r.Name {
		return v, fmt.Errorf("qlog: event is %s, not %s", r.Name, want)
	}
	err := r.Decode(&v)
	return v, err
}

// Named returns the events with the given name, in order.
func (f *File) Named(name string) []Record {
	var out []Record
	for _, r := range f.Events {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// Ordered reports an error if event times ever decrease. qvis warns about
// such traces and sorts them, so Quiver's own traces must be ordered; other
// implementations' traces may not be, which is why Parse does not check it.
func (f *File) Ordered() error {
	for i := 1; i < len(f.Events); i++ {
		if f.Events[i].Time < f.Events[i-1].Time {
			return fmt.Errorf("qlog: event %d (%s) at %v ms is earlier than event %d at %v ms",
				i, f.Events[i].Name, f.Events[i].Time, i-1, f.Events[i-1].Time)
		}
	}
	return nil
}

// ReadFile parses the qlog file at path.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Read parses a qlog trace from r.
func Read(r io.Reader) (*File, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	return Parse(b)
}

// Parse parses a JSON-SEQ qlog 0.3 trace and validates what qvis needs:
// the file starts with a record separator; the header has qlog_version
// "0.3", qlog_format "JSON-SEQ", a trace with a numeric reference_time and a
// relative time_format; every event has a numeric time and a name of the
// form "category:type", and a data member that is an object if present.
func Parse(data []byte) (*File, error) {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 || data[0] != recordSeparator {
		return nil, errors.New("qlog: not JSON-SEQ: the file does not start with a record separator (0x1e)")
	}
	chunks := bytes.Split(data[1:], []byte{recordSeparator})
	f := &File{}
	seenHeader := false
	for i, c := range chunks {
		c = bytes.TrimSpace(c)
		if len(c) == 0 {
			continue // RFC 7464 lets parsers skip empty records
		}
		if !seenHeader {
			if err := parseHeader(c, &f.Header); err != nil {
				return nil, err
			}
			seenHeader = true
			continue
		}
		r, err := parseEvent(c)
		if err != nil {
			return nil, fmt.Errorf("qlog: record %d: %w", i, err)
		}
		f.Events = append(f.Events, r)
	}
	if !seenHeader {
		return nil, errors.New("qlog: no header record")
	}
	return f, nil
}

func parseHeader(b []byte, h *Header) error {
	var raw struct {
		QlogVersion *string `json:"qlog_version"`
		QlogFormat  string  `json:"qlog_format"`
		Title       string  `json:"title"`
		Description string  `json:"description"`
		Trace       *struct {
			VantagePoint struct {
				Type string `json:"type"`
			} `json:"vantage_point"`
			CommonFields struct {
				ODCID         json.RawMessage `json:"ODCID"`
				ReferenceTime json.RawMessage `json:"reference_time"`
				TimeFormat    string          `json:"time_format"`
			} `json:"common_fields"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("qlog: header: %w", err)
	}
	if raw.QlogVersion == nil {
		return errors.New("qlog: header has no qlog_version")
	}
	if *raw.QlogVersion != QlogVersion {
		return fmt.Errorf("qlog: qlog_version is %q, want %q", *raw.QlogVersion, QlogVersion)
	}
	if raw.QlogFormat != QlogFormat {
		return fmt.Errorf("qlog: qlog_format is %q, want %q", raw.QlogFormat, QlogFormat)
	}
	if raw.Trace == nil {
		return errors.New("qlog: header has no trace")
	}
	cf := &raw.Trace.CommonFields
	ref, err := parseNumber(cf.ReferenceTime)
	if err != nil {
		return fmt.Errorf("qlog: reference_time: %w", err)
	}
	if cf.TimeFormat != "" && cf.TimeFormat != "relative" {
		return fmt.Errorf("qlog: time_format %q is not supported, only relative", cf.TimeFormat)
	}
	var odcid string
	if len(cf.ODCID) > 0 {
		if err := json.Unmarshal(cf.ODCID, &odcid); err != nil {
			return fmt.Errorf("qlog: ODCID must be a hex string: %w", err)
		}
	}
	*h = Header{
		QlogVersion:   *raw.QlogVersion,
		QlogFormat:    raw.QlogFormat,
		Title:         raw.Title,
		Description:   raw.Description,
		VantagePoint:  raw.Trace.VantagePoint.Type,
		ODCID:         odcid,
		ReferenceTime: ref,
		TimeFormat:    cf.TimeFormat,
		Raw:           append(json.RawMessage(nil), b...),
	}
	return nil
}

// parseNumber accepts only a JSON number: qvis adds reference_time and time
// arithmetically, and a string there silently concatenates in JavaScript.
func parseNumber(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 {
		return 0, errors.New("missing")
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	return v, nil
}

func parseEvent(b []byte) (Record, error) {
	var raw struct {
		Time json.RawMessage `json:"time"`
		Name *string         `json:"name"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Record{}, err
	}
	t, err := parseNumber(raw.Time)
	if err != nil {
		return Record{}, fmt.Errorf("time: %w", err)
	}
	if raw.Name == nil {
		return Record{}, errors.New("event has no name")
	}
	cat, typ, ok := strings.Cut(*raw.Name, ":")
	if !ok || cat == "" || typ == "" {
		return Record{}, fmt.Errorf("event name %q is not of the form category:type", *raw.Name)
	}
	r := Record{Time: t, Name: *raw.Name}
	if len(raw.Data) > 0 && string(raw.Data) != "null" {
		if raw.Data[0] != '{' {
			return Record{}, fmt.Errorf("%s: data is not an object", r.Name)
		}
		if err := json.Unmarshal(raw.Data, &r.Data); err != nil {
			return Record{}, fmt.Errorf("%s: data: %w", r.Name, err)
		}
		r.RawData = append(json.RawMessage(nil), raw.Data...)
	}
	return r, nil
}
