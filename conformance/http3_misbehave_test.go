package conformance

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// scriptedH3 is an HTTP/3 server written by hand on Quiver's engine, for
// showing that the family K scenarios fail when a server breaks their
// rules: Quiver's own h3.Server keeps them, and has no switch to stop.
// It answers every request with one fixed response, without looking at it.
type scriptedH3 struct {
	// settings are the SETTINGS pairs; there is no reserved one unless
	// given.
	settings []uint64
	// control follows SETTINGS on the control stream.
	control []byte
	// encoder follows the type on the encoder stream.
	encoder []byte
	// push opens a push stream (push ID 0) on every connection.
	push bool
	// section is the response's field section (default: :status 200
	// from literals).
	section []byte
	// strict closes the connection on anything it does not know: a
	// reserved frame, stream type, setting or error code, or a QPACK
	// stream.
	strict bool
	// noQPACKStreams closes the connection when the client opens a QPACK
	// stream.
	noQPACKStreams bool
	// maxUni is the engine's MaxUniStreams (0: the default).
	maxUni int64
}

// start runs the server and returns its address.
func (s scriptedH3) start(t *testing.T) string {
	cert, _, err := peers.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{
		TLSConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNH3}},
		MaxUniStreams: s.maxUni,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ep.Accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(ctx, c, &wg) }()
		}
	}()
	t.Cleanup(func() { cancel(); ep.Close(); wg.Wait() })
	return ep.Addr().String()
}

func (s scriptedH3) serve(ctx context.Context, c *quic.Conn, wg *sync.WaitGroup) {
	defer c.Close(0, "")
	uni := func(b []byte) {
		if st, err := c.OpenUniStream(ctx); err == nil {
			st.Write(b)
		}
	}
	uni(cat([]byte{0x00}, settingsFrame(s.settings...), s.control))
	uni(cat([]byte{0x02}, s.encoder))
	if s.push {
		// The tester allows three unidirectional streams: the push
		// stream takes the decoder stream's place.
		uni(cat([]byte{0x01, 0x00}, headersFrameOf(literalSection([]hfield{{":status", "200"}}))))
	} else {
		uni([]byte{0x03})
	}
	section := s.section
	if section == nil {
		section = literalSection([]hfield{{":status", "200"}})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st, err := c.AcceptUniStream(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Judge the stream after every read: control and QPACK
				// streams never end.
				var b []byte
				buf := make([]byte, 1024)
				for len(b) < 4096 {
					n, err := st.Read(buf)
					b = append(b, buf[:n]...)
					if (s.strict || s.noQPACKStreams) && len(b) > 0 && !s.knownUni(b) {
						c.Close(uint64(h3.ErrCodeStreamCreationError), "strict")
						return
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	for {
		st, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		b, err := io.ReadAll(io.LimitReader(st, 64<<10))
		var reset *quic.StreamResetError
		if s.strict && errors.As(err, &reset) && isReservedH3(reset.Code) {
			c.Close(uint64(h3.ErrCodeGeneralProtocolError), "strict: unknown error code")
			return
		}
		if fs, _ := h3Frames(b); s.strict && slices.ContainsFunc(fs, func(f h3RawFrame) bool { return isReservedH3(f.typ) }) {
			c.Close(uint64(h3.ErrCodeFrameUnexpected), "strict: reserved frame")
			return
		}
		st.Write(cat(headersFrameOf(section), rawquic.H3Frame(0x00, []byte("hello"))))
		st.CloseWrite()
	}
}

// knownUni reports whether the server accepts a client unidirectional
// stream: a QPACK stream unless noQPACKStreams, or a control stream with
// only known settings and frames.
func (s scriptedH3) knownUni(b []byte) bool {
	if len(b) > 0 && (b[0] == 0x02 || b[0] == 0x03) {
		return !s.noQPACKStreams
	}
	if len(b) == 0 || b[0] != 0x00 {
		return false
	}
	fs, _ := h3Frames(b[1:])
	for _, f := range fs {
		if isReservedH3(f.typ) {
			return false
		}
		if f.typ != 0x04 {
			continue
		}
		for p := f.payload; len(p) > 0; {
			id, n, err := wire.ConsumeVarint(p)
			if err != nil {
				break
			}
			if id != 0x01 && id != 0x06 && id != 0x07 {
				return false
			}
			_, m, err := wire.ConsumeVarint(p[n:])
			if err != nil {
				break
			}
			p = p[n+m:]
		}
	}
	return true
}

// TestMisbehavingH3Server shows that the family K scenarios of
// http3.go and h3wire.go fail against a server that breaks their rules.
func TestMisbehavingH3Server(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios against scripted servers")
	}
	t.Run("lax", func(t *testing.T) {
		// Answers 200 to anything, never greases, advertises a dynamic
		// table it never reads.
		addr := scriptedH3{settings: []uint64{h3.SettingQPACKMaxTableCapacity, 4096, h3.SettingQPACKBlockedStreams, 1}}.start(t)
		expectVerdictsALPN(t, "scripted-lax", addr, "h3", map[string][]Verdict{
			"h3-server-greases-settings":        {Warn},
			"h3-malformed-uppercase-field":      {Fail},
			"h3-malformed-pseudo-after-regular": {Fail},
			"h3-malformed-connection-header":    {Fail},
			"h3-malformed-missing-path":         {Fail},
			"h3-content-length-mismatch":        {Observed},
			"qpack-dynamic-table-used":          {Fail},
			"qpack-entry-too-large":             {Fail},
			"qpack-blocked-streams-exceeded":    {Fail},
			"qpack-invalid-static-index":        {Fail},
			"qpack-invalid-dynamic-reference":   {Fail},
			"h3-request-basic":                  {Pass},
		})
	})
	t.Run("strict", func(t *testing.T) {
		addr := scriptedH3{strict: true}.start(t)
		expectVerdictsALPN(t, "scripted-strict", addr, "h3", map[string][]Verdict{
			"h3-reserved-frames-ignored":   {Fail},
			"h3-reserved-stream-ignored":   {Fail},
			"h3-reserved-settings-ignored": {Fail},
			"h3-unknown-error-code":        {Fail},
		})
	})
	t.Run("no-qpack-streams", func(t *testing.T) {
		addr := scriptedH3{noQPACKStreams: true}.start(t)
		expectVerdictsALPN(t, "scripted-no-qpack-streams", addr, "h3", map[string][]Verdict{"qpack-streams-allowed": {Fail}})
	})
	t.Run("rules", func(t *testing.T) {
		// A push stream without MAX_PUSH_ID, a second SETTINGS frame,
		// encoder instructions and dynamic references towards a
		// zero-capacity decoder, a capacity above 256.
		addr := scriptedH3{push: true, control: settingsFrame(), encoder: cat(setCapacity(512), insertLiteral("x", "y")),
			section: cat([]byte{0x02, 0x00, 0x80})}.start(t)
		expectVerdictsALPN(t, "scripted-rules", addr, "h3", map[string][]Verdict{
			"h3-no-push-without-max-push-id": {Fail},
			"h3-request-basic":               {Fail},
			"qpack-zero-capacity-respected":  {Fail},
			"qpack-capacity-respected":       {Fail},
		})
	})
	t.Run("uni-limit", func(t *testing.T) {
		addr := scriptedH3{maxUni: 2}.start(t)
		expectVerdictsALPN(t, "scripted-uni-limit", addr, "h3", map[string][]Verdict{"h3-server-uni-limit": {Fail}})
	})
}
