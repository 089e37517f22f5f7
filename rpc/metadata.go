package rpc

import (
	"context"
	"strings"
)

// Metadata is a call's key/value side data, sent with the request. Keys are
// lower case ASCII; values are any text that can travel in an HTTP header
// field (no control characters).
type Metadata map[string][]string

// Pairs builds Metadata from alternating keys and values.
func Pairs(kv ...string) Metadata {
	md := Metadata{}
	for i := 0; i+1 < len(kv); i += 2 {
		md.Append(kv[i], kv[i+1])
	}
	return md
}

// Get returns the first value of key, or "".
func (md Metadata) Get(key string) string {
	if v := md[strings.ToLower(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Append adds a value to key.
func (md Metadata) Append(key, value string) {
	key = strings.ToLower(key)
	md[key] = append(md[key], value)
}

// clone returns a deep copy of md merged over nothing.
func (md Metadata) clone() Metadata {
	out := make(Metadata, len(md))
	for k, v := range md {
		out[k] = append([]string(nil), v...)
	}
	return out
}

type outgoingKey struct{}
type incomingKey struct{}

// WithMetadata returns a context whose calls carry md (merged with any
// metadata already attached).
func WithMetadata(ctx context.Context, md Metadata) context.Context {
	if old, ok := ctx.Value(outgoingKey{}).(Metadata); ok {
		merged := old.clone()
		for k, v := range md {
			for _, x := range v {
				merged.Append(k, x)
			}
		}
		md = merged
	}
	return context.WithValue(ctx, outgoingKey{}, md)
}

// MetadataFrom returns the metadata of the call a handler is serving.
func MetadataFrom(ctx context.Context) Metadata {
	md, _ := ctx.Value(incomingKey{}).(Metadata)
	return md
}

func outgoingMetadata(ctx context.Context) Metadata {
	md, _ := ctx.Value(outgoingKey{}).(Metadata)
	return md
}
