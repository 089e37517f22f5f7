package h3

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/quiver-quic/quiver/h3/qpack"
	"github.com/quiver-quic/quiver/internal/strcache"
)

// HTTP fields (RFC 9114 §4.2, §4.3) and their QPACK encoding (h3/qpack,
// with the dynamic table when the peer allows one).

// connectionSpecific lists the fields RFC 9114 §4.2 forbids: "An endpoint
// MUST NOT generate an HTTP/3 field section containing connection-specific
// fields; any message containing connection-specific fields MUST be treated
// as malformed."
var connectionSpecific = map[string]bool{
	"connection":        true,
	"keep-alive":        true,
	"proxy-connection":  true,
	"transfer-encoding": true,
	"upgrade":           true,
}

// fieldList lists pseudo-header fields then the fields of h, with names
// lowercased and connection-specific fields, and those for which skip
// returns true, left out.
func fieldList(pseudo []qpack.HeaderField, h http.Header, skip func(name string) bool) []qpack.HeaderField {
	fields := append([]qpack.HeaderField(nil), pseudo...)
	for k, vs := range h {
		name := lowerName(k)
		// RFC 9114 §4.2: "Characters in field names MUST be converted to
		// lowercase prior to their encoding."
		if connectionSpecific[name] || (skip != nil && skip(name)) {
			continue
		}
		if name == "te" {
			// RFC 9114 §4.2: the TE header field "MAY be present in an
			// HTTP/3 request header; when it is, it MUST NOT contain any
			// value other than "trailers"."
			vs = []string{"trailers"}
		}
		for _, v := range vs {
			fields = append(fields, qpack.HeaderField{Name: name, Value: v})
		}
	}
	return fields
}

// lowerNames and canonicalNames map header names to another form of them
// (lower case, canonical): strings.ToLower and http.CanonicalHeaderKey
// allocated for every field of every message, a tenth of an HTTP/3 RPC's
// allocations (docs/highway.md). They are bounded, so names that change
// from message to message cannot grow them without end; past the bound
// they are converted each time.
var (
	lowerNames     = strcache.Cache{MaxEntries: maxCachedNames}
	canonicalNames = strcache.Cache{MaxEntries: maxCachedNames}
)

const maxCachedNames = 512

// lowerName returns k in lower case.
func lowerName(k string) string {
	for i := 0; i < len(k); i++ {
		if c := k[i]; 'A' <= c && c <= 'Z' {
			return lowerNames.Convert(k, strings.ToLower)
		}
	}
	return k
}

// canonicalName returns http.CanonicalHeaderKey(k).
func canonicalName(k string) string { return canonicalNames.Convert(k, http.CanonicalHeaderKey) }

// encodeFieldSection QPACK-encodes fieldList(pseudo, h, skip) for stream.
func (s *session) encodeFieldSection(stream int64, pseudo []qpack.HeaderField, h http.Header, skip func(name string) bool) []byte {
	return s.encodeFields(stream, fieldList(pseudo, h, skip))
}

// headersFrame wraps an encoded field section in a HEADERS frame.
func headersFrame(fieldSection []byte) []byte {
	b := make([]byte, 0, len(fieldSection)+16)
	return (&HeadersFrame{FieldSection: fieldSection}).Append(b)
}

// errFieldSectionTooLarge reports a field section above the local limit.
type errFieldSectionTooLarge struct{ size, limit uint64 }

func (e errFieldSectionTooLarge) Error() string {
	return "h3: field section of " + strconv.FormatUint(e.size, 10) + " bytes exceeds the limit of " + strconv.FormatUint(e.limit, 10)
}

// decodeFieldSection decodes a QPACK field section that needs no dynamic
// table (a decoder allowing none): what the fuzz targets feed the request
// and response parsers. A failure is a QPACK_DECOMPRESSION_FAILED
// connection error; a section above limit (RFC 9114 §4.2.2 counting)
// returns errFieldSectionTooLarge.
func decodeFieldSection(p []byte, limit uint64) ([]qpack.HeaderField, error) {
	s := &session{dec: qpack.NewDecoder(0, 0, func([]byte) {}), ctx: context.Background()}
	return s.decodeFields(context.Background(), 0, p, limit)
}

// malformed builds the stream error of RFC 9114 §4.1.2: "Malformed requests
// or responses that are detected MUST be treated as a stream error of type
// H3_MESSAGE_ERROR."
func malformed(format string, args ...any) *Error {
	return streamError(ErrCodeMessageError, "malformed message: "+format, args...)
}

// validFieldName reports whether name is a lowercase HTTP token.
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validFieldValue rejects the characters RFC 9114 §10.3 singles out: "A
// request or response that contains a character not permitted in a field
// value MUST be treated as malformed" (NUL, CR and LF).
func validFieldValue(v string) bool {
	return strings.IndexAny(v, "\x00\r\n") < 0
}

// addRegularField checks one regular field and adds it to h.
func addRegularField(h http.Header, f qpack.HeaderField) error {
	if !validFieldName(f.Name) {
		if strings.ToLower(f.Name) != f.Name {
			return malformed(`field name %q has uppercase characters; RFC 9114 §4.2: "A request or response containing uppercase characters in field names MUST be treated as malformed"`, f.Name)
		}
		return malformed("invalid field name %q", f.Name)
	}
	if !validFieldValue(f.Value) {
		return malformed(`field %q has a NUL, CR or LF in its value; RFC 9114 §10.3: "A request or response that contains a character not permitted in a field value MUST be treated as malformed"`, f.Name)
	}
	if connectionSpecific[f.Name] {
		return malformed(`connection-specific field %q; RFC 9114 §4.2: "any message containing connection-specific fields MUST be treated as malformed"`, f.Name)
	}
	if f.Name == "te" && f.Value != "trailers" {
		return malformed(`te: %q; RFC 9114 §4.2: TE "MUST NOT contain any value other than "trailers""`, f.Value)
	}
	h.Add(canonicalName(f.Name), f.Value)
	return nil
}

const rulePseudoOrder = `RFC 9114 §4.3: "Any request or response that contains a pseudo-header field that appears in a header section after a regular header field MUST be treated as malformed"`

// splitFields checks that pseudo-header fields come first, adds the regular
// fields to h, and returns the pseudo-header fields.
func splitFields(fields []qpack.HeaderField, h http.Header) ([]qpack.HeaderField, error) {
	n := 0
	for n < len(fields) && strings.HasPrefix(fields[n].Name, ":") {
		n++
	}
	for _, f := range fields[n:] {
		if strings.HasPrefix(f.Name, ":") {
			return nil, malformed("%s after a regular field; %s", f.Name, rulePseudoOrder)
		}
		if err := addRegularField(h, f); err != nil {
			return nil, err
		}
	}
	return fields[:n], nil
}

// requestHead is a validated request header section.
type requestHead struct {
	method, scheme, authority, path, protocol string
	header                                    http.Header
	contentLength                             int64
}

// parseRequestHead validates a request header section (RFC 9114 §4.3.1).
func parseRequestHead(fields []qpack.HeaderField) (*requestHead, error) {
	rh := &requestHead{header: make(http.Header), contentLength: -1}
	var seen [5]bool // method, scheme, authority, path, protocol
	pseudo, err := splitFields(fields, rh.header)
	if err != nil {
		return nil, err
	}
	for _, f := range pseudo {
		var i int
		var dst *string
		switch f.Name {
		case ":method":
			i, dst = 0, &rh.method
		case ":scheme":
			i, dst = 1, &rh.scheme
		case ":authority":
			i, dst = 2, &rh.authority
		case ":path":
			i, dst = 3, &rh.path
		case ":protocol":
			// Extended CONNECT (RFC 9220) is not offered in SETTINGS, so a
			// :protocol field is undefined here.
			return nil, malformed(`pseudo-header %s without SETTINGS_ENABLE_CONNECT_PROTOCOL; RFC 9114 §4.3: "Endpoints MUST treat a request or response that contains undefined or invalid pseudo-header fields as malformed"`, f.Name)
		default:
			return nil, malformed(`pseudo-header %q is not defined for requests; RFC 9114 §4.3: "Endpoints MUST treat a request or response that contains undefined or invalid pseudo-header fields as malformed"`, f.Name)
		}
		if seen[i] {
			return nil, malformed(`%s appears twice; RFC 9114 §4.3.1: "All HTTP/3 requests MUST include exactly one value for the :method, :scheme, and :path pseudo-header fields"`, f.Name)
		}
		seen[i] = true
		*dst = f.Value
	}
	if rh.method == "" || !validFieldName(strings.ToLower(rh.method)) {
		return nil, malformed(`missing or invalid :method %q; RFC 9114 §4.3.1: "All HTTP/3 requests MUST include exactly one value for the :method, :scheme, and :path pseudo-header fields"`, rh.method)
	}
	host := rh.header.Get("Host")
	if len(rh.header.Values("Host")) > 1 {
		return nil, malformed("more than one Host field")
	}
	if rh.method == http.MethodConnect {
		// RFC 9114 §4.4: "The :scheme and :path pseudo-header fields are
		// omitted" and "The :authority pseudo-header field contains the host
		// and port to connect to".
		if seen[1] || seen[3] || rh.authority == "" {
			return nil, malformed("CONNECT must carry :authority and neither :scheme nor :path (RFC 9114 §4.4)")
		}
	} else {
		if !seen[1] || !seen[3] {
			return nil, malformed(`missing :scheme or :path; RFC 9114 §4.3.1: "All HTTP/3 requests MUST include exactly one value for the :method, :scheme, and :path pseudo-header fields, unless the request is a CONNECT request"`)
		}
		if rh.scheme == "http" || rh.scheme == "https" {
			if rh.path == "" {
				return nil, malformed(`empty :path; RFC 9114 §4.3.1: "This pseudo-header field MUST NOT be empty for "http" or "https" URIs"`)
			}
			// RFC 9114 §4.3.1: "the request MUST contain either an
			// :authority pseudo-header field or a Host header field. If
			// these fields are present, they MUST NOT be empty. If both
			// fields are present, they MUST contain the same value."
			if (seen[2] && rh.authority == "") || (rh.header["Host"] != nil && host == "") || (!seen[2] && host == "") {
				return nil, malformed(`missing or empty :authority/Host; RFC 9114 §4.3.1: "the request MUST contain either an :authority pseudo-header field or a Host header field. If these fields are present, they MUST NOT be empty."`)
			}
			if seen[2] && host != "" && host != rh.authority {
				return nil, malformed(`:authority %q and Host %q differ; RFC 9114 §4.3.1: "If both fields are present, they MUST contain the same value"`, rh.authority, host)
			}
			if strings.Contains(rh.authority, "@") {
				return nil, malformed(`:authority has userinfo; RFC 9114 §4.3.1: "The authority MUST NOT include the deprecated userinfo subcomponent for URIs of scheme "http" or "https""`)
			}
		}
		if rh.path != "*" && !strings.HasPrefix(rh.path, "/") || rh.path == "*" && rh.method != http.MethodOptions {
			return nil, malformed(":path %q is neither origin-form nor \"*\" for OPTIONS (RFC 9114 §4.3.1)", rh.path)
		}
	}
	if rh.authority == "" {
		rh.authority = host
	}
	cl, err := parseContentLength(rh.header)
	if err != nil {
		return nil, err
	}
	rh.contentLength = cl
	return rh, nil
}

// parseContentLength returns the Content-Length of h, or -1 if absent.
func parseContentLength(h http.Header) (int64, error) {
	vs := h.Values("Content-Length")
	if len(vs) == 0 {
		return -1, nil
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return 0, malformed("conflicting Content-Length values %q", vs)
		}
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < 0 || strings.TrimLeft(vs[0], "0123456789") != "" {
		return 0, malformed("invalid Content-Length %q", vs[0])
	}
	return n, nil
}

// responseHead is a validated response header section.
type responseHead struct {
	status        int
	header        http.Header
	contentLength int64
}

// parseResponseHead validates a response header section (RFC 9114 §4.3.2).
func parseResponseHead(fields []qpack.HeaderField) (*responseHead, error) {
	rh := &responseHead{header: make(http.Header), contentLength: -1}
	seenStatus := false
	pseudo, err := splitFields(fields, rh.header)
	if err != nil {
		return nil, err
	}
	for _, f := range pseudo {
		if f.Name != ":status" {
			return nil, malformed(`pseudo-header %q in a response; RFC 9114 §4.3: "pseudo-header fields defined for requests MUST NOT appear in responses"`, f.Name)
		}
		if seenStatus {
			return nil, malformed(":status appears twice")
		}
		seenStatus = true
		n, err := strconv.Atoi(f.Value)
		if err != nil || len(f.Value) != 3 || n < 100 {
			return nil, malformed("invalid :status %q", f.Value)
		}
		rh.status = n
	}
	if !seenStatus {
		return nil, malformed(`no :status; RFC 9114 §4.3.2: "This pseudo-header field MUST be included in all responses; otherwise, the response is malformed"`)
	}
	cl, err := parseContentLength(rh.header)
	if err != nil {
		return nil, err
	}
	rh.contentLength = cl
	return rh, nil
}

// parseTrailers validates a trailer section and adds it to h.
func parseTrailers(fields []qpack.HeaderField, h http.Header) error {
	for _, f := range fields {
		if strings.HasPrefix(f.Name, ":") {
			return malformed(`pseudo-header %s in trailers; RFC 9114 §4.3: "Pseudo-header fields MUST NOT appear in trailer sections"`, f.Name)
		}
		if err := addRegularField(h, f); err != nil {
			return err
		}
	}
	return nil
}
