package rpc

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestProtoCodec(t *testing.T) {
	k := kits(t)[0]
	srv := NewServer()
	Register(srv, "Bytes.Echo", func(ctx context.Context, r *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
		return wrapperspb.Bytes(append(r.Value, '!')), nil
	})
	l := k.listen(t, "")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() { srv.Close(); <-done }()
	c := NewClient(k.dial(l.Addr()), WithCodec(Proto))
	defer c.Close()
	resp, err := Call[wrapperspb.BytesValue, wrapperspb.BytesValue](context.Background(), c, "Bytes.Echo", wrapperspb.Bytes([]byte("hi")))
	if err != nil || !bytes.Equal(resp.Value, []byte("hi!")) {
		t.Fatalf("proto echo = %v, %v", resp, err)
	}
	// A JSON client reaches the same server: the codec travels per call.
	cj := NewClient(k.dial(l.Addr()))
	defer cj.Close()
	if _, err := Call[struct{}, struct{}](context.Background(), cj, "Bytes.Echo", &struct{}{}); err != nil {
		t.Fatalf("JSON call of a proto handler: %v", err)
	}
	if _, err := Proto.Marshal(&struct{}{}); err == nil {
		t.Error("proto codec accepted a non-proto value")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	req := &Request{Method: "A.B", Codec: "json", Metadata: Pairs("k", "v", "k", "w"), Timeout: 1500000, Idempotent: true, Payload: []byte("xyz")}
	b := appendRequest(nil, 7, req)
	f, err := parseFrame(b[4:])
	if err != nil || f.callID != 7 || f.req.Method != "A.B" || f.req.Timeout != req.Timeout || !f.req.Idempotent ||
		len(f.req.Metadata["k"]) != 2 || string(f.req.Payload) != "xyz" {
		t.Fatalf("request frame round trip: %+v %+v, %v", f, f.req, err)
	}
	b = appendEnd(nil, 9, &Status{Code: NotFound, Message: "gone"})
	if f, err := parseFrame(b[4:]); err != nil || f.status.Code != NotFound || f.status.Message != "gone" {
		t.Fatalf("end frame round trip: %+v, %v", f, err)
	}
	for i := range len(b) - 4 {
		parseFrame(b[4 : 4+i]) // truncated frames fail without panicking
	}
}

func FuzzParseFrame(f *testing.F) {
	f.Add(appendRequest(nil, 1, &Request{Method: "m", Metadata: Pairs("a", "b"), Payload: []byte("p")})[4:])
	f.Add(appendEnd(nil, 2, &Status{Code: Internal, Message: "x"})[4:])
	f.Add(appendRequest(nil, 3, &Request{Method: "s", Stream: true, Idempotent: true})[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err == nil && fr.typ == frameRequest {
			// A request survives re-encoding with its flags.
			again, err := parseFrame(appendRequest(nil, fr.callID, fr.req)[4:])
			if err != nil || again.req.Stream != fr.req.Stream || again.req.Idempotent != fr.req.Idempotent || again.req.Method != fr.req.Method {
				t.Fatalf("request %+v re-encoded as %+v (%v)", fr.req, again.req, err)
			}
		}
	})
}
