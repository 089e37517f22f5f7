package rpc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The framed wire format, shared by TCP+TLS, Unix, QUIC, UDP and the HTTP
// response bodies. Every frame is
//
//	length (4 bytes, big endian, of what follows)
//	type (1 byte) | flags (1 byte) | call ID (varint) | body
//
// and the bodies are
//
//	request: method (string) | codec (string) | timeout µs (varint) |
//	         metadata count (varint) | (key, value strings)* | payload
//	message: payload
//	end:     code (varint) | message (string)
//	cancel:  empty
//
// where a string is a varint length and its bytes.
const (
	frameRequest byte = 1
	frameMessage byte = 2
	frameEnd     byte = 3
	frameCancel  byte = 4
)

const (
	flagIdempotent byte = 1
	// flagStream: message frames from the client follow the request, and
	// an end frame from the client closes its side.
	flagStream byte = 2
)

// frameOverhead bounds the bytes a frame adds to its payload beyond method
// and metadata; a frame larger than the message size limit plus this is a
// protocol error.
const frameOverhead = 64 << 10

// frame is a decoded frame. Its slices alias the buffer it was read into.
type frame struct {
	typ    byte
	flags  byte
	callID uint64
	req    *Request // frameRequest
	status *Status  // frameEnd
	data   []byte   // frameMessage
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// beginFrame reserves the length prefix and writes the header.
func beginFrame(b []byte, typ, flags byte, id uint64) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, typ, flags)
	return binary.AppendUvarint(b, id), start
}

func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendRequest(b []byte, id uint64, r *Request) []byte {
	var flags byte
	if r.Idempotent {
		flags |= flagIdempotent
	}
	if r.Stream {
		flags |= flagStream
	}
	size := 40 + len(r.Method) + len(r.Codec) + len(r.Payload)
	for k, vs := range r.Metadata {
		for _, v := range vs {
			size += 20 + len(k) + len(v)
		}
	}
	b = grow(b, size)
	b, start := beginFrame(b, frameRequest, flags, id)
	b = appendString(b, r.Method)
	b = appendString(b, r.Codec)
	b = binary.AppendUvarint(b, uint64(r.Timeout/time.Microsecond))
	n := 0
	for _, v := range r.Metadata {
		n += len(v)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range r.Metadata {
		for _, v := range vs {
			b = appendString(b, k)
			b = appendString(b, v)
		}
	}
	b = append(b, r.Payload...)
	return endFrame(b, start)
}

// grow makes room for n more bytes in one allocation: frames built by
// append grew their buffer two or three times each (docs/highway.md).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(make([]byte, 0, len(b)+n), b...)
}

func appendMessage(b []byte, id uint64, payload []byte) []byte {
	b = grow(b, 16+len(payload))
	b, start := beginFrame(b, frameMessage, 0, id)
	b = append(b, payload...)
	return endFrame(b, start)
}

func appendEnd(b []byte, id uint64, st *Status) []byte {
	if st == nil {
		st = &Status{}
	}
	b = grow(b, 32+len(st.Message))
	b, start := beginFrame(b, frameEnd, 0, id)
	b = binary.AppendUvarint(b, uint64(st.Code))
	b = appendString(b, st.Message)
	return endFrame(b, start)
}

func appendCancel(b []byte, id uint64) []byte {
	b, start := beginFrame(b, frameCancel, 0, id)
	return endFrame(b, start)
}

var errBadFrame = errors.New("rpc: malformed frame")

type frameDecoder struct{ b []byte }

func (d *frameDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.b = nil
		panic(errBadFrame)
	}
	d.b = d.b[n:]
	return v
}

func (d *frameDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		panic(errBadFrame)
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// parseFrame decodes one frame body (after the length prefix).
func parseFrame(b []byte) (f frame, err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != errBadFrame {
				panic(v)
			}
			err = errBadFrame
		}
	}()
	if len(b) < 3 {
		return f, errBadFrame
	}
	f.typ, f.flags = b[0], b[1]
	d := frameDecoder{b[2:]}
	f.callID = d.uvarint()
	switch f.typ {
	case frameRequest:
		r := &Request{Idempotent: f.flags&flagIdempotent != 0, Stream: f.flags&flagStream != 0}
		r.Method = string(d.bytes())
		r.Codec = string(d.bytes())
		r.Timeout = time.Duration(d.uvarint()) * time.Microsecond
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			return f, errBadFrame
		}
		if n > 0 {
			r.Metadata = make(Metadata, n)
		}
		for range n {
			k := string(d.bytes())
			r.Metadata[k] = append(r.Metadata[k], string(d.bytes()))
		}
		r.Payload = d.b
		f.req = r
	case frameMessage:
		f.data = d.b
	case frameEnd:
		f.status = &Status{Code: Code(d.uvarint())}
		f.status.Message = string(d.bytes())
	case frameCancel:
	default:
		return f, fmt.Errorf("rpc: unknown frame type %d", f.typ)
	}
	return f, nil
}

// readFrame reads one frame of at most max bytes into a new buffer.
func readFrame(r *bufio.Reader, max int) (frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(max) {
		return frame{}, fmt.Errorf("rpc: frame of %d bytes exceeds the limit of %d", n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return parseFrame(buf)
}
