package h3

import (
	"context"

	"github.com/quiver-quic/quiver/quic"
)

// FromQUIC adapts a connection of Quiver's QUIC engine to Conn, so the
// HTTP/3 and hq-interop code here runs on the engine. The engine's
// *quic.Stream already has the shape of Stream; only the connection's
// methods need their result types widened.
func FromQUIC(c *quic.Conn) Conn { return quicConn{c} }

type quicConn struct{ c *quic.Conn }

func (a quicConn) OpenStream(ctx context.Context) (Stream, error) {
	return widen(a.c.OpenStream(ctx))
}

func (a quicConn) OpenUniStream(ctx context.Context) (Stream, error) {
	return widen(a.c.OpenUniStream(ctx))
}

func (a quicConn) AcceptStream(ctx context.Context) (Stream, error) {
	return widen(a.c.AcceptStream(ctx))
}

func (a quicConn) AcceptUniStream(ctx context.Context) (Stream, error) {
	return widen(a.c.AcceptUniStream(ctx))
}

func (a quicConn) Close(code uint64, reason string) error { return a.c.Close(code, reason) }
func (a quicConn) ALPN() string                           { return a.c.ALPN() }

// widen turns a (*quic.Stream, error) pair into (Stream, error) without
// producing a non-nil interface holding a nil pointer.
func widen(s *quic.Stream, err error) (Stream, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}
